"""Demonstrations: per-step arrays of scripted-expert episodes, from exact, seeded starts.

:func:`collect_demonstrations` runs a scripted expert
(:mod:`wmrl_env.envs.robosuite.experts`) in a registered environment, one episode per start
seed (``reset(seed=start_seeds[i])`` reproduces the start exactly), and keeps every
transition of every episode, successful or not: behaviour cloning uses the successful ones
(:meth:`Demonstrations.successful`), a dynamics world model can learn from all of them.

Example:
    >>> import numpy as np
    >>> demos = Demonstrations.from_episodes(
    ...     "toy", [[(np.zeros(2), np.ones(1), 0.0, np.ones(2), False)] * 3], start_seeds=[7]
    ... )
    >>> demos.num_steps, demos.num_episodes, demos.episode_success.tolist()
    (3, 1, [False])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["Demonstrations", "collect_demonstrations"]

_STEP_FIELDS = ("observations", "actions", "rewards", "next_observations", "successes")


@dataclass
class Demonstrations:
    """Transitions of whole episodes, in episode order, as flat per-step arrays.

    Attributes:
        env_id: the environment they were collected in.
        observations: ``(T, obs_dim)`` float32, the state each action was chosen in.
        actions: ``(T, action_dim)`` float32, the action sent to the env.
        rewards: ``(T,)`` float32, the env's reward for the step.
        next_observations: ``(T, obs_dim)`` float32, the state after the step.
        successes: ``(T,)`` bool, ``info["success"]`` after the step.
        terminals: ``(T,)`` bool, the env's ``terminated`` flag (not truncation).
        episode: ``(T,)`` int64, the episode index of each step (0, 1, ...).
        start_seeds: ``(num_episodes,)`` int64, ``reset(seed=...)`` of each episode.
        metadata: how they were made (expert, noise, horizon, env kwargs); saved as JSON.
    """

    env_id: str
    observations: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    next_observations: np.ndarray
    successes: np.ndarray
    terminals: np.ndarray
    episode: np.ndarray
    start_seeds: np.ndarray
    metadata: dict[str, Any]

    def __post_init__(self) -> None:
        steps = len(self.observations)
        for name in (*_STEP_FIELDS, "terminals", "episode"):
            if len(getattr(self, name)) != steps:
                raise ValueError(f"{name} has {len(getattr(self, name))} rows, expected {steps}")
        for name in ("observations", "actions", "next_observations", "rewards"):
            if not np.isfinite(getattr(self, name)).all():
                raise ValueError(f"demonstrations contain NaN or inf in {name}")
        if steps and (np.diff(self.episode) < 0).any():
            raise ValueError("episode indices must be in episode order")
        if steps and self.episode.max() >= len(self.start_seeds):
            raise ValueError(
                f"{len(self.start_seeds)} start seeds for {self.episode.max() + 1} episodes"
            )

    @classmethod
    def from_episodes(
        cls,
        env_id: str,
        episodes: Sequence[Sequence[tuple]],
        start_seeds: Sequence[int],
        metadata: dict[str, Any] | None = None,
    ) -> Demonstrations:
        """From episodes of ``(obs, action, reward, next_obs, success[, terminated])`` steps."""
        rows = [(i, *step) for i, steps in enumerate(episodes) for step in steps]
        if not rows:
            raise ValueError("no transitions: every episode is empty")
        columns = list(zip(*rows, strict=False))
        terminals = columns[6] if len(columns) > 6 else [False] * len(rows)
        return cls(
            env_id=env_id,
            observations=np.asarray(columns[1], np.float32),
            actions=np.asarray(columns[2], np.float32),
            rewards=np.asarray(columns[3], np.float32),
            next_observations=np.asarray(columns[4], np.float32),
            successes=np.asarray(columns[5], bool),
            terminals=np.asarray(terminals, bool),
            episode=np.asarray(columns[0], np.int64),
            start_seeds=np.asarray(start_seeds, np.int64),
            metadata=dict(metadata or {}),
        )

    @property
    def num_steps(self) -> int:
        return len(self.observations)

    @property
    def num_episodes(self) -> int:
        return len(self.start_seeds)

    @property
    def episode_success(self) -> np.ndarray:
        """``(num_episodes,)`` bool: did the task succeed at any step of the episode."""
        reached = np.zeros(self.num_episodes, bool)
        np.logical_or.at(reached, self.episode, self.successes)
        return reached

    @property
    def episode_starts(self) -> np.ndarray:
        """Index of each episode's first step (an episode with no steps has none)."""
        return np.flatnonzero(np.r_[True, np.diff(self.episode) != 0])

    def select_episodes(self, keep: np.ndarray) -> Demonstrations:
        """The episodes where ``keep`` (a ``(num_episodes,)`` bool mask) holds, renumbered."""
        keep = np.asarray(keep, bool)
        if keep.shape != (self.num_episodes,):
            raise ValueError(f"keep has shape {keep.shape}, expected ({self.num_episodes},)")
        rows = keep[self.episode]
        renumber = np.cumsum(keep) - 1
        return Demonstrations(
            env_id=self.env_id,
            **{name: getattr(self, name)[rows] for name in (*_STEP_FIELDS, "terminals")},
            episode=renumber[self.episode[rows]],
            start_seeds=self.start_seeds[keep],
            metadata=dict(self.metadata),
        )

    def successful(self) -> Demonstrations:
        """Only the episodes that succeeded (what behaviour cloning trains on)."""
        return self.select_episodes(self.episode_success)

    def save(self, path: str | Path) -> Path:
        """Write one compressed ``.npz`` (arrays + metadata as JSON); returns the path."""
        import json

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        arrays = {f.name: getattr(self, f.name) for f in fields(self)}
        arrays["env_id"] = np.asarray(self.env_id)
        arrays["metadata"] = np.asarray(json.dumps(self.metadata))
        with open(path, "wb") as handle:
            np.savez_compressed(handle, **arrays)
        return path

    @classmethod
    def load(cls, path: str | Path) -> Demonstrations:
        """Read what :meth:`save` wrote (checked as on construction)."""
        import json

        with np.load(Path(path), allow_pickle=False) as data:
            values = {f.name: data[f.name] for f in fields(cls)}
        values["env_id"] = str(values["env_id"])
        values["metadata"] = json.loads(str(values["metadata"]))
        return cls(**values)


def collect_demonstrations(
    env_id: str,
    num_episodes: int,
    noise: float = 0.0,
    seed: int = 0,
    horizon: int = 100,
    perturb_prob: float = 0.0,
    terminate_on_success: bool = True,
    env_kwargs: dict[str, Any] | None = None,
    env: gym.Env | None = None,
) -> Demonstrations:
    """Roll the scripted expert of ``env_id`` out for ``num_episodes`` seeded episodes.

    Episode ``i`` starts from ``reset(seed=seed + i)`` and its expert noise is seeded with the
    same number, so the same arguments give the same arrays. Episodes end at ``horizon`` steps
    or, with ``terminate_on_success``, at the first success.

    Args:
        env_id: a registered id with a scripted expert (``"wmrl/Lift-v0"``, ``"wmrl/Stack-v0"``).
        num_episodes: how many episodes.
        noise: std of the expert's Gaussian position-command noise.
        seed: start seed of episode 0.
        horizon: steps per episode at most.
        perturb_prob: the expert's chance per step of a random push.
        terminate_on_success: end an episode at its first success.
        env_kwargs: more keyword arguments for ``gym.make``.
        env: an already built env of ``env_id`` to reuse (its horizon must be ``horizon``).

    Example (needs robosuite)::

        demos = collect_demonstrations("wmrl/Lift-v0", 20, noise=0.3, horizon=80)
        demos.save("runs/lift_demos.npz")
    """
    import wmrl_env.envs.robosuite  # noqa: F401  (registers the ids)
    from wmrl_env.envs.robosuite.experts import make_expert

    if num_episodes < 1:
        raise ValueError(f"num_episodes must be >= 1, got {num_episodes}")
    kwargs = {"horizon": horizon, "terminate_on_success": terminate_on_success}
    kwargs.update(env_kwargs or {})
    own_env = env is None
    env = gym.make(env_id, **kwargs) if own_env else env
    expert = make_expert(env_id, noise=noise, perturb_prob=perturb_prob)
    seeds = [seed + i for i in range(num_episodes)]
    episodes = []
    try:
        for start in seeds:
            observation, _ = env.reset(seed=start)
            expert.reset(seed=start)
            steps, over = [], False
            while not over:
                action = expert(observation)
                following, reward, terminated, truncated, info = env.step(action)
                steps.append((observation, action, reward, following, info["success"], terminated))
                observation, over = following, terminated or truncated
            episodes.append(steps)
    finally:
        if own_env:
            env.close()
    metadata = {
        "expert": type(expert).__name__,
        "noise": noise,
        "perturb_prob": perturb_prob,
        "horizon": horizon,
        "seed": seed,
        "env_kwargs": kwargs,
    }
    return Demonstrations.from_episodes(env_id, episodes, seeds, metadata)
