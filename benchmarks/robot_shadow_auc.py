"""How well does the robot bench's world model predict real success on the current policy's
episodes, scored by each shadow (open, closed, continued)? (docs/benchmarks.md)

For each seed: the bench's base policy and pretrained world model (termination head), and the
``real`` arm's GRPO run (every group real, the world model not refitted) for ``--rounds``
rounds of ``--groups`` groups of 4 (round 1 is the base policy's own episodes). Every real
episode is scored by the three shadows of :mod:`wmrl_env.wrappers.shadows` on the same world
model: ``open`` as the vector env computes it, ``closed`` and ``continued`` by
:class:`~wmrl_env.wrappers.shadows.AnchorShadow` with the policy that played the round (its
mean chunk, the episode's own noise kept), as ``WorldModelVectorEnv(shadow=...)`` does.
Prints, per shadow, the pooled and the within-group ROC AUC over all episodes with 95 %
intervals from a bootstrap over groups, and per round; ``--out`` keeps one JSON line per
episode (seed, round, group, success, the three scores).

    nice -n 10 python benchmarks/robot_shadow_auc.py --seeds 0 8 --rounds 3 --groups 8
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

SHADOWS = ("open", "closed", "continued")
BOOTSTRAP = 2000


def round_episodes(rollout) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per env: the states its actions were chosen on and the actions it played (clipped)."""
    episodes = []
    for i in range(len(rollout.active[0])):
        steps = [t for t, active in enumerate(rollout.active) if active[i]]
        states = np.stack([np.asarray(rollout.observations[t][i]) for t in steps])
        actions = np.stack([np.asarray(rollout.executed_actions[t][i]) for t in steps])
        episodes.append((states, actions))
    return episodes


def aucs(rows: list[dict], shadow: str) -> tuple[float, float]:
    from wmrl_env.bench.robotics.predictor_check import predictor_check

    scores = np.array([r[shadow] for r in rows])
    successes = np.array([r["success"] for r in rows])
    groups = np.array([hash((r["seed"], r["round"], r["group"])) for r in rows])
    check = predictor_check(scores, successes, groups)
    return check.auc, check.within_group_auc


def bootstrap(rows: list[dict], shadow: str, rng: np.random.Generator) -> np.ndarray:
    """95 % percentile intervals of (pooled, within-group) AUC, groups resampled."""
    by_group: dict[tuple, list[dict]] = {}
    for r in rows:
        by_group.setdefault((r["seed"], r["round"], r["group"]), []).append(r)
    keys = list(by_group)
    draws = []
    for _ in range(BOOTSTRAP):
        picked = rng.integers(len(keys), size=len(keys))
        sample = [
            {**r, "group": (k, copy_index)}
            for copy_index, k in enumerate(picked)
            for r in by_group[keys[k]]
        ]
        draws.append(aucs(sample, shadow))
    return np.nanpercentile(np.array(draws), [2.5, 97.5], axis=0)


def run_seed(seed: int, rounds: int, groups: int) -> list[dict]:
    from wmrl_env import RewardFusion, WorldModelVectorEnv
    from wmrl_env.bench.robotics import RobotBenchConfig
    from wmrl_env.bench.robotics.runner import imagination
    from wmrl_env.bench.robotics.start import base_policy, copy_model, make_task_env, prepare_seed
    from wmrl_env.bench.runner import grpo_config
    from wmrl_env.env_executors import GymEnvExecutor
    from wmrl_env.grpo import train
    from wmrl_env.wrappers.shadows import AnchorShadow

    config = RobotBenchConfig.full(arms=("real",), iterations=rounds, num_groups=groups,
                                   shadow="open", cache_dir="runs/base_policy")  # fmt: skip
    start = prepare_seed(config, seed)
    world_model = start.world_model(config)
    policy, _ = base_policy(config, seed)
    chunk, horizon = start.chunk_size, start.horizon

    def env_fn():
        return make_task_env(config.task, horizon, chunk)

    executor = GymEnvExecutor(env_fn, backend="thread", num_workers=1, max_envs=1)
    envs = WorldModelVectorEnv(
        env_fn, world_model, groups, config.group_size, executor=executor, task="dynamics",
        fusion=RewardFusion(method="real", anchor_fraction=config.anchor_fraction, seed=seed),
        max_episode_steps=start.episode_chunks, shadow="open",
    )  # fmt: skip
    space = envs.single_action_space
    played = {"policy": copy_model(policy), "round": 0}
    rows: list[dict] = []

    def on_round(rollout) -> None:  # after the update: score with the policy that played
        played["round"] += 1
        info = rollout.final_info
        mean = imagination(RobotBenchConfig(shadow="closed"), "real", played["policy"])
        episodes = round_episodes(rollout)
        states, actions = [e[0] for e in episodes], [e[1] for e in episodes]
        scores = {"open": np.asarray(info["wm_score"], np.float64)}
        for shadow in SHADOWS[1:]:
            imagined = AnchorShadow(shadow, mean["imagination_policy"], keep_noise=True,
                                    bounds=(space.low, space.high))  # fmt: skip
            scores[shadow] = imagined.scores(world_model, states, actions, start.episode_chunks)[0]
        for i, real in enumerate(np.asarray(info["real_score"], np.float64)):
            if np.isfinite(real):
                rows.append({"seed": seed, "round": played["round"],
                             "group": int(info["group_id"][i]), "success": bool(real > 0),
                             **{s: float(scores[s][i]) for s in SHADOWS}})  # fmt: skip
        played["policy"] = copy_model(policy)

    try:
        train(envs, policy, grpo_config(config, seed), on_round=on_round)
    finally:
        envs.close()
    return rows


def main(argv: list[str] | None = None) -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 8])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--groups", type=int, default=8)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rows = []
    for seed in args.seeds:
        rows += run_seed(seed, args.rounds, args.groups)
        print(f"seed {seed}: {len(rows)} episodes so far", flush=True)
    if args.out:
        args.out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    successes = sum(r["success"] for r in rows)
    print(f"\n{len(rows)} real episodes, {successes} successes\n")
    print("| shadow | pooled AUC (95 % CI) | within-group AUC (95 % CI) |")
    print("|---|---|---|")
    rng = np.random.default_rng(0)
    for shadow in SHADOWS:
        (pooled, within), (low, high) = aucs(rows, shadow), bootstrap(rows, shadow, rng)
        print(f"| {shadow} | {pooled:.3f} [{low[0]:.3f}, {high[0]:.3f}] "
              f"| {within:.3f} [{low[1]:.3f}, {high[1]:.3f}] |")  # fmt: skip
    print("\nper round (all seeds): pooled / within-group AUC")
    for round_ in sorted({r["round"] for r in rows}):
        part = [r for r in rows if r["round"] == round_]
        cells = ", ".join("{}: {:.3f} / {:.3f}".format(s, *aucs(part, s)) for s in SHADOWS)
        print(f"round {round_} ({len(part)} episodes, {sum(r['success'] for r in part)} "
              f"successes): {cells}")  # fmt: skip


if __name__ == "__main__":
    main()
