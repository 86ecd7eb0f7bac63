"""A behaviour-cloned base policy worth post-training, in one call: :func:`make_base_policy`.

VLA post-training starts from a supervised policy that succeeds sometimes: GRPO learns from
groups whose members differ in outcome, so a policy that always fails (or always succeeds)
gives it nothing. :func:`make_base_policy` collects noisy scripted-expert demonstrations
(:func:`~wmrl_env.robotics.demonstrations.collect_demonstrations`), clones the successful ones
(:func:`~wmrl_env.robotics.behaviour_cloning.train_bc_policy`) with a recipe per task
(:data:`RECIPES`) chosen so the policy succeeds on a moderate share of held-out starts, and
caches both on disk. Demonstrations use start seeds ``seed * 1000 + i``; evaluate on
:data:`HELD_OUT_SEED` and above, which no recipe reaches.

Example (needs robosuite and torch)::

    policy, demos = make_base_policy("Lift", seed=0, cache_dir="runs/base_policy")
    chunks = policy(demos.observations[:2], [policy.instruction] * 2)   # (2, 8, 7), mean
    actions, log_probs = policy.act(demos.observations[:2])              # sampled, for GRPO
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from wmrl_env.integrations.vla import ChunkedGaussianPolicy
from wmrl_env.robotics.behaviour_cloning import load_policy, save_policy, train_bc_policy
from wmrl_env.robotics.demonstrations import Demonstrations, collect_demonstrations

__all__ = ["HELD_OUT_SEED", "RECIPES", "BasePolicyRecipe", "make_base_policy"]

#: first start seed of held-out evaluation episodes (demonstration seeds stay below it)
HELD_OUT_SEED = 1_000_000


@dataclass(frozen=True)
class BasePolicyRecipe:
    """How a base policy is made: demonstrations, then behaviour cloning.

    Attributes:
        num_episodes: demonstration episodes collected (all kept in the data).
        bc_episodes: how many successful episodes are cloned (the first ones; all if fewer
            succeeded). Fixing the count, not the share, keeps the policy's quality steady
            across seeds.
        noise: std of the expert's Gaussian position-command noise.
        perturb_prob: the expert's chance per step of a random push.
        horizon: steps per episode (demonstrations and evaluation).
        chunk_size: actions per predicted chunk.
        hidden: width of the policy MLP's two hidden layers.
        epochs: training epochs over the cloned demonstrations.
        learning_rate: AdamW learning rate.
        log_std_init: the policy's initial exploration log std (GRPO samples with it), one
            number or one per action dimension.
        instruction: the task's instruction.
    """

    num_episodes: int = 30
    bc_episodes: int = 10
    noise: float = 0.3
    perturb_prob: float = 0.03
    horizon: int = 60
    chunk_size: int = 8
    hidden: int = 128
    epochs: int = 100
    learning_rate: float = 1e-3
    # exploration std 0.2 on the position and gripper commands, 0.03 on the rotation commands
    # (the experts never rotate, so the clone has not learnt to undo a rotation)
    log_std_init: float | tuple[float, ...] = (-1.6, -1.6, -1.6, -3.5, -3.5, -3.5, -1.6)
    instruction: str = ""

    def __post_init__(self) -> None:
        if self.num_episodes > HELD_OUT_SEED // 1000:
            raise ValueError(f"at most {HELD_OUT_SEED // 1000} episodes per recipe")


#: the default recipe of each task
RECIPES: dict[str, BasePolicyRecipe] = {
    "Lift": BasePolicyRecipe(horizon=60, instruction="lift the cube"),
    # measured at seed 0: greedy 27 %, sampled 17 % (10 cloned episodes of noise 0.3: 0 %)
    "Stack": BasePolicyRecipe(
        num_episodes=40,
        bc_episodes=40,
        noise=0.15,
        perturb_prob=0.01,
        horizon=150,
        instruction="stack the red cube on the green cube",
    ),
}


def make_base_policy(
    task: str = "Lift",
    seed: int = 0,
    cache_dir: str | Path | None = None,
    **overrides: Any,
) -> tuple[ChunkedGaussianPolicy, Demonstrations]:
    """Collect demonstrations and clone them; ``(policy, demonstrations)``.

    The demonstrations are all episodes collected, failed ones included (for a world model);
    ``demos.metadata["cloned_episodes"]`` lists the episodes the policy was cloned from.

    Args:
        task: ``"Lift"`` or ``"Stack"`` (env ``wmrl/<task>-v0``).
        seed: seeds everything: demonstration starts ``seed * 1000 + i``, expert noise,
            weights, minibatches and the policy's exploration noise.
        cache_dir: if given, the demonstrations (``.npz``) and weights (``.pt``) are stored
            there under a name made of the task, seed and recipe, and reused on the next call.
        **overrides: fields of :class:`BasePolicyRecipe` to change.
    """
    if task not in RECIPES:
        raise ValueError(f"no base-policy recipe for {task!r}; recipes exist for {sorted(RECIPES)}")
    recipe = replace(RECIPES[task], **overrides)
    env_id = f"wmrl/{task}-v0"
    demos_path = policy_path = None
    if cache_dir is not None:
        key = _cache_key(task, seed, recipe)
        demos_path = Path(cache_dir) / f"{key}.demos.npz"
        policy_path = Path(cache_dir) / f"{key}.policy.pt"
    if demos_path is not None and demos_path.exists():
        demos = Demonstrations.load(demos_path)
    else:
        demos = collect_demonstrations(
            env_id,
            recipe.num_episodes,
            noise=recipe.noise,
            seed=seed * 1000,
            horizon=recipe.horizon,
            perturb_prob=recipe.perturb_prob,
        )
        demos.metadata["recipe"] = asdict(recipe)
        succeeded = np.flatnonzero(demos.episode_success)
        demos.metadata["cloned_episodes"] = succeeded[: recipe.bc_episodes].tolist()
        if demos_path is not None:
            demos.save(demos_path)
    if policy_path is not None and policy_path.exists():
        return load_policy(policy_path, seed=seed), demos
    cloned = np.isin(np.arange(demos.num_episodes), demos.metadata["cloned_episodes"])
    policy = train_bc_policy(
        demos.select_episodes(cloned) if cloned.any() else demos,  # raises if none succeeded
        chunk_size=recipe.chunk_size,
        instruction=recipe.instruction,
        log_std_init=recipe.log_std_init,
        seed=seed,
        hidden=recipe.hidden,
        epochs=recipe.epochs,
        learning_rate=recipe.learning_rate,
    )
    if policy_path is not None:
        save_policy(policy, policy_path)
    return policy, demos


def _cache_key(task: str, seed: int, recipe: BasePolicyRecipe) -> str:
    import hashlib

    digest = hashlib.sha256(json.dumps(asdict(recipe), sort_keys=True).encode()).hexdigest()
    return f"{task.lower()}-seed{seed}-{digest[:10]}"
