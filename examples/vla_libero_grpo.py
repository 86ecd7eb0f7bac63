"""GRPO post-training of a VLA-style policy on a LIBERO-Long task, through WorldModelVectorEnv.

Read top to bottom (CleanRL style). Every GRPO round is ``num_groups`` groups of
``group_size`` rollouts; the members of a group share one LIBERO init state (bit-identical
snapshots). The fusion picks the anchor groups: they roll out in the real simulator (LIBERO
in its own interpreter, through ``SubprocessEnv``); the other groups roll out in the learned
dynamics ensemble, which is refitted on the anchors' real transitions after every round. The
binary success reward is fused as usual (``method="wmrl"``); ``method="real"`` executes every
group for real (the baseline).

On a CPU the "VLA" is a small MLP on LIBERO's low-dimensional state emitting action chunks
(``StateMLPBackbone``); for a real VLA on a GPU see ``docs/robotics.md``: the backbone becomes
the VLA (images + instruction -> chunk), the dynamics ensemble an image world model.

    python examples/vla_libero_grpo.py --iterations 3              # LIBERO-Long task 0
    python examples/vla_libero_grpo.py --method real --out runs/real.csv
    python examples/vla_libero_grpo.py --env lift                  # robosuite Lift instead
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from wmrl_env.fusion import RewardFusion
from wmrl_env.grpo import GRPOConfig, Rollout, collect_rollout, grpo_loss
from wmrl_env.grpo.transitions import anchor_transitions
from wmrl_env.integrations.vla import ActionChunking, ChunkedGaussianPolicy, StateMLPBackbone
from wmrl_env.world_models.dynamics import EnsembleConfig, EnsembleDynamicsModel
from wmrl_env.wrappers import WorldModelVectorEnv


@dataclass
class Args:
    env: str = "libero"
    """'libero' (LIBERO-Long, state observations) or 'lift' (robosuite Lift, sparse success)"""
    task_id: int = 0
    """LIBERO-Long task (0-9)"""
    method: str = "wmrl"
    """fusion method: 'wmrl' (anchors + world model) or 'real' (every group executed)"""
    num_groups: int = 4
    """GRPO groups per round"""
    group_size: int = 4
    """rollouts per group (they share an init state)"""
    anchor_fraction: float = 0.25
    """share of groups executed for real (method 'wmrl')"""
    chunk_size: int = 8
    """actions per policy call (OpenVLA-OFT executes chunks of 8 open-loop)"""
    episode_chunks: int = 12
    """episode length in chunks"""
    iterations: int = 10
    """GRPO rounds"""
    warmup_episodes: int = 4
    """real episodes that train the dynamics model before the first round"""
    learning_rate: float = 3e-3
    """Adam learning rate of the policy"""
    update_epochs: int = 2
    """gradient steps per round"""
    eval_every: int = 0
    """evaluate the mean policy in the real env every N rounds (0: never)"""
    eval_episodes: int = 4
    """real episodes per evaluation"""
    seed: int = 0
    """seeds the policy, the fusion, the model and the group starts"""
    out: str = ""
    """CSV file for the per-round log ('' for none)"""

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


def instruction_of(env: gym.Env) -> str:
    """The task's instruction: an attribute of LiberoEnv, a remote call through the bridge."""
    for read in (lambda: env.get_wrapper_attr("instruction"),
                 lambda: env.get_wrapper_attr("call")("instruction")):  # fmt: skip
        try:
            return str(read())
        except AttributeError:
            continue
    return "lift the red cube"


def real_episodes(env: gym.Env, policy: Any, episodes: int, seed: int, mean: bool) -> dict:
    """Play ``episodes`` real episodes; their transitions and success flags."""
    rows: dict[str, list] = {k: [] for k in ("obs", "act", "next", "rew", "term")}
    successes = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        done, success = False, False
        while not done:
            if mean:
                chunk = policy(obs[None], [policy.instruction])[0]
            else:
                chunk = policy.act(obs[None])[0][0]
            chunk = np.clip(chunk, env.action_space.low, env.action_space.high)
            nxt, reward, terminated, truncated, _ = env.step(chunk)
            for key, value in zip(rows, (obs, chunk, nxt, reward, terminated), strict=True):
                rows[key].append(value)
            obs, done, success = nxt, terminated or truncated, success or reward > 0
        successes.append(success)
    arrays = {k: np.asarray(v) for k, v in rows.items()}
    return {**arrays, "success": np.asarray(successes, dtype=float)}


def train(args: Args) -> list[dict[str, Any]]:
    torch.manual_seed(args.seed)  # the script owns its process: seed torch's default generator
    probe = make_env(args)
    obs_dim = probe.observation_space.shape[0]
    chunk, action_dim = probe.action_space.shape
    instruction = instruction_of(probe)
    backbone = StateMLPBackbone.build(obs_dim, chunk, action_dim, seed=args.seed)
    policy = ChunkedGaussianPolicy(backbone, instruction, seed=args.seed)

    # 1. a few real episodes: input normalisation for the policy, first data for the model
    warmup = real_episodes(probe, policy, args.warmup_episodes, seed=10_000, mean=False)
    backbone.set_normalisation(warmup["obs"])
    model = EnsembleDynamicsModel(
        obs_dim,
        chunk * action_dim,
        EnsembleConfig(ensemble_size=5, hidden_sizes=(256, 256), max_epochs=60, seed=args.seed),
    )
    flat = warmup["act"].reshape(len(warmup["act"]), -1)
    model.update(warmup["obs"], flat, warmup["next"], warmup["rew"], warmup["term"])

    # 2. the vector env of GRPO groups: anchors real, the rest in the learned model
    fusion = RewardFusion(method=args.method, anchor_fraction=args.anchor_fraction, seed=args.seed)
    envs = WorldModelVectorEnv(
        lambda: make_env(args),
        model,
        num_groups=args.num_groups,
        group_size=args.group_size,
        fusion=fusion,
        executor="thread",
        num_workers=min(args.num_groups * args.group_size, 8),
        task="dynamics",
        max_episode_steps=args.episode_chunks,
    )
    config = GRPOConfig(iterations=args.iterations, learning_rate=args.learning_rate)
    optimizer = torch.optim.Adam(policy.parameters(), lr=config.learning_rate)
    history = []
    try:
        for iteration in range(args.iterations):
            started = time.perf_counter()
            rollout = collect_rollout(envs, policy, seed=args.seed if iteration == 0 else None)
            info = rollout.final_info
            advantages = torch.as_tensor(np.asarray(info["advantage"], dtype=np.float32))
            for _ in range(args.update_epochs):
                loss, stats = grpo_loss(policy, rollout, advantages, config)
                optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(policy.parameters(), config.max_grad_norm)
                optimizer.step()
            round_seconds = time.perf_counter() - started
            real = anchor_transitions(rollout)  # 3. refit on the anchors' reality
            if len(real) and args.method == "wmrl":
                model.update(
                    real.observations,
                    real.flat_actions(),
                    real.next_observations,
                    real.rewards,
                    real.terminations,
                )
            row = log_row(iteration, rollout, float(loss.detach()), round_seconds, stats)
            row["update_seconds"] = time.perf_counter() - started - round_seconds
            if args.eval_every and (iteration + 1) % args.eval_every == 0:
                evaluation = real_episodes(probe, policy, args.eval_episodes, 20_000, mean=True)
                row["eval_success"] = float(evaluation["success"].mean())
            history.append(row)
            print(
                " ".join(
                    f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()
                ),
                flush=True,
            )
    finally:
        envs.close()
        probe.close()
    return history


def log_row(iteration: int, rollout: Rollout, loss: float, seconds: float, stats: dict) -> dict:
    info = rollout.final_info
    anchors = np.asarray(info["is_anchor"], dtype=bool)
    real = np.asarray(info["real_score"], dtype=np.float64)
    timing = [i.get("batch", {}) for i in rollout.infos]
    return {
        "iteration": iteration,
        "anchor_success": float(np.nanmean(real[anchors] > 0)) if anchors.any() else float("nan"),
        "fused_reward": float(np.nanmean(info["fused_reward"])),
        "wm_score": float(np.nanmean(info["wm_score"])),
        "n_anchor_trajectories": int(anchors.sum()),
        "round_seconds": seconds,
        "real_wall_seconds": float(sum(t["real_wall_seconds"][0] for t in timing)),
        "wm_seconds": float(sum(t["wm_seconds"][0] for t in timing)),
        "loss": loss,
        **stats,
    }


def parse_args(argv: list[str] | None = None) -> Args:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for f in dataclasses.fields(Args):
        parser.add_argument(
            f"--{f.name.replace('_', '-')}", type=type(f.default), default=f.default
        )
    return Args(**vars(parser.parse_args(argv)))


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    args = parse_args(argv)
    history = train(args)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        with open(args.out, "w", newline="") as stream:
            writer = csv.DictWriter(stream, fieldnames=sorted({k for r in history for k in r}))
            writer.writeheader()
            writer.writerows(history)
    return history


if __name__ == "__main__":
    main()
