"""GRPO post-training of a VLA-style policy on a LIBERO-Long task, through WorldModelVectorEnv.

Read top to bottom (CleanRL style). Every GRPO round is ``num_groups`` groups of
``group_size`` rollouts; the members of a group share one LIBERO init state (bit-identical
snapshots). The fusion picks the anchor groups: they roll out in the real simulator (LIBERO
in its own interpreter, a few live workers reused round after round); the other groups roll
out in the learned dynamics ensemble, which is refitted on the anchors' real transitions
after every round. The binary success reward is fused as usual (``method="wmrl"``);
``method="real"`` executes every group for real (the baseline).

On a CPU the "VLA" is a small MLP on LIBERO's low-dimensional state emitting action chunks
(``StateMLPBackbone``); for a real VLA on a GPU see ``docs/robotics.md``: the backbone becomes
the VLA (images + instruction -> chunk), the dynamics ensemble an image world model.

    python examples/vla_libero_grpo.py --iterations 3              # LIBERO-Long task 0
    python examples/vla_libero_grpo.py --method real --out runs/real.csv
    python examples/vla_libero_grpo.py --env lift                  # robosuite Lift instead
"""

from __future__ import annotations

import csv
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from wmrl_env.env_executors import GymEnvExecutor
from wmrl_env.fusion import RewardFusion
from wmrl_env.grpo import GRPOConfig, collect_rollout, grpo_loss
from wmrl_env.grpo.transitions import Transitions, anchor_transitions
from wmrl_env.integrations.vla import ActionChunking, ChunkedGaussianPolicy, StateMLPBackbone
from wmrl_env.utils.args import parse_args
from wmrl_env.world_models.dynamics.ensemble import EnsembleConfig, EnsembleDynamicsModel
from wmrl_env.wrappers import WorldModelVectorEnv


@dataclass
class Args:
    """GRPO post-training of a chunk policy on LIBERO-Long (or robosuite Lift)."""

    env: str = field(default="libero", metadata={"help": "'libero' (LIBERO-Long) or 'lift'"})
    task_id: int = field(default=0, metadata={"help": "LIBERO-Long task (0-9)"})
    method: str = field(default="wmrl", metadata={"help": "'wmrl' or 'real' (all executed)"})
    num_groups: int = field(default=4, metadata={"help": "GRPO groups per round"})
    group_size: int = field(default=4, metadata={"help": "rollouts per group (one init state)"})
    anchor_fraction: float = field(default=0.25, metadata={"help": "share of groups run real"})
    chunk_size: int = field(default=8, metadata={"help": "actions per policy call"})
    episode_chunks: int = field(default=12, metadata={"help": "episode length in chunks"})
    iterations: int = field(default=10, metadata={"help": "GRPO rounds"})
    warmup_episodes: int = field(default=4, metadata={"help": "real episodes before round 1"})
    learning_rate: float = field(default=3e-3, metadata={"help": "Adam learning rate"})
    update_epochs: int = field(default=2, metadata={"help": "gradient steps per round"})
    real_envs: int = field(default=0, metadata={"help": "live real envs (0: a round's need)"})
    eval_every: int = field(default=0, metadata={"help": "evaluate every N rounds (0: never)"})
    eval_episodes: int = field(default=4, metadata={"help": "real episodes per evaluation"})
    seed: int = field(default=0, metadata={"help": "policy, fusion, model and group starts"})
    out: str = field(default="", metadata={"help": "CSV file for the per-round log"})

    def __post_init__(self) -> None:
        if self.env not in ("libero", "lift"):
            raise ValueError(f"--env must be 'libero' or 'lift', got {self.env!r}")
        if self.method not in ("wmrl", "real"):
            raise ValueError(f"--method must be 'wmrl' or 'real', got {self.method!r}")


def make_env(args: Args) -> gym.Env:
    """One real env: a success-rewarded task whose step executes an action chunk."""
    horizon = args.chunk_size * args.episode_chunks
    if args.env == "libero":
        from wmrl_env.envs.libero import make_libero_env

        env = make_libero_env(suite="libero_10", task_id=args.task_id, horizon=horizon)
    else:
        from wmrl_env.envs.robosuite import RobosuiteEnv

        env = RobosuiteEnv("Lift", horizon=horizon, reward_shaping=False, terminate_on_success=True)
    return ActionChunking(env, args.chunk_size)


def play_real(
    env: gym.Env, policy: Any, episodes: int, seed: int, sample: bool
) -> tuple[Transitions, np.ndarray]:
    """Real episodes with the sampled (``sample``) or mean policy: transitions and successes."""
    rows: dict[str, list] = {key: [] for key in ("obs", "act", "next", "rew", "term")}
    successes = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        done = success = False
        while not done:
            chunk = (
                policy.act(obs[None])[0][0]
                if sample
                else policy(obs[None], [policy.instruction])[0]
            )
            chunk = np.clip(chunk, env.action_space.low, env.action_space.high)
            nxt, reward, terminated, truncated, _ = env.step(chunk)
            for key, value in zip(rows, (obs, chunk, nxt, reward, terminated), strict=True):
                rows[key].append(value)
            obs, done, success = nxt, terminated or truncated, success or reward > 0
        successes.append(success)
    return Transitions(*(np.asarray(v) for v in rows.values())), np.asarray(successes)


def refit(model: EnsembleDynamicsModel, real: Transitions) -> None:
    """Add the anchors' real transitions (chunks flattened to one action vector) and refit."""
    if len(real):
        model.update(
            real.observations, real.flat_actions(), real.next_observations, real.rewards,
            real.terminations,
        )  # fmt: skip


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    args = parse_args(Args, argv)
    torch.manual_seed(args.seed)  # the script owns its process: seed torch's default generator
    probe = make_env(args)  # one real env for the warm-up and the evaluations
    obs_dim = probe.observation_space.shape[0]
    chunk, action_dim = probe.action_space.shape
    _, start_info = probe.reset(seed=0)
    backbone = StateMLPBackbone.build(obs_dim, chunk, action_dim, seed=args.seed)
    instruction = start_info.get("instruction", "lift the red cube")
    policy = ChunkedGaussianPolicy(backbone, instruction, seed=args.seed)

    # 1. a few real episodes: input normalisation for the policy, first data for the model
    warmup, _ = play_real(probe, policy, args.warmup_episodes, seed=10_000, sample=True)
    backbone.set_normalisation(warmup.observations)
    model = EnsembleDynamicsModel(
        obs_dim,
        chunk * action_dim,
        EnsembleConfig(ensemble_size=5, hidden_sizes=(256, 256), max_epochs=60, seed=args.seed),
    )
    refit(model, warmup)

    # 2. the vector env of GRPO groups: anchors real, the rest in the learned model; the real
    # envs (LIBERO workers) stay alive between rounds, at most `real_envs` of them
    def real_env() -> gym.Env:
        return make_env(args)

    executor = GymEnvExecutor(
        real_env,
        backend="thread",
        num_workers=min(args.num_groups * args.group_size, 8),
        max_envs=args.real_envs or None,
    )
    envs = WorldModelVectorEnv(
        real_env,
        model,
        num_groups=args.num_groups,
        group_size=args.group_size,
        fusion=RewardFusion(args.method, anchor_fraction=args.anchor_fraction, seed=args.seed),
        executor=executor,
        task="dynamics",
        max_episode_steps=args.episode_chunks,
    )
    config = GRPOConfig(iterations=args.iterations, learning_rate=args.learning_rate)
    optimizer = torch.optim.Adam(policy.parameters(), lr=config.learning_rate)
    history = []
    try:
        for iteration in range(args.iterations):
            # 3. play one round: world-model groups imagined, anchor groups real
            started = time.perf_counter()
            rollout = collect_rollout(envs, policy, seed=args.seed if iteration == 0 else None)
            info = rollout.final_info
            advantages = torch.as_tensor(np.asarray(info["advantage"], dtype=np.float32))
            # 4. the GRPO update on the fused advantages
            for _ in range(args.update_epochs):
                loss, stats = grpo_loss(policy, rollout, advantages, config)
                optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(policy.parameters(), config.max_grad_norm)
                optimizer.step()
            round_seconds = time.perf_counter() - started
            # 5. refit the world model on the anchors' real transitions
            if args.method == "wmrl":
                refit(model, anchor_transitions(rollout))

            anchors = np.asarray(info["is_anchor"], dtype=bool)
            real = np.asarray(info["real_score"], dtype=np.float64)
            timing = [step["batch"] for step in rollout.infos]
            row = {
                "iteration": iteration,
                "anchor_success": float(np.nanmean(real[anchors] > 0)) if anchors.any() else np.nan,
                "fused_reward": float(np.nanmean(info["fused_reward"])),
                "wm_score": float(np.nanmean(info["wm_score"])),
                "n_anchor_trajectories": int(anchors.sum()),
                "round_seconds": round_seconds,
                "update_seconds": time.perf_counter() - started - round_seconds,
                "real_wall_seconds": float(sum(t["real_wall_seconds"][0] for t in timing)),
                "wm_seconds": float(sum(t["wm_seconds"][0] for t in timing)),
                "model_transitions": len(model.buffer),
                "loss": float(loss.detach()),
                **stats,
            }
            if args.eval_every and (iteration + 1) % args.eval_every == 0:
                _, successes = play_real(probe, policy, args.eval_episodes, 20_000, sample=False)
                row["eval_success"] = float(successes.mean())
            history.append(row)
            print(" ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                           for k, v in row.items()), flush=True)  # fmt: skip
    finally:
        envs.close()
        probe.close()

    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        with open(args.out, "w", newline="") as stream:
            writer = csv.DictWriter(stream, fieldnames=sorted({k for r in history for k in r}))
            writer.writeheader()
            writer.writerows(history)
    return history


if __name__ == "__main__":
    main()
