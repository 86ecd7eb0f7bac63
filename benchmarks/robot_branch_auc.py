"""Does the robot bench's world model predict real success better from real mid-episode states
than from the start? (docs/benchmarks.md)

For each seed: the bench's base policy and pretrained world model (termination head), and a
GRPO run where every group is real (``method="real"``, the world model not refitted) for
``--rounds`` rounds of ``--groups`` groups of 4, with branched starts
(``WorldModelVectorEnv(branch_starts=BranchStarts(groups // 2))``): from round 2 on, half of the
groups start from real states that the previous round's real episodes reached (exact
snapshots) and play on to the episode's end. Every real episode is scored by the closed
shadow (the policy that played the round plays the model from the group's start, its
episode's own noise kept), as a world-model member of that group would be; ``--shadow open``
scores it by replaying its real chunks in the model instead (it sees the real episode).
Prints the pooled and the within-group ROC AUC of that score against real success, apart for
branched and fresh groups (and, for branched ones, by how many chunks into the episode they
start), with 95 % intervals from a bootstrap over groups; ``--out`` keeps one JSON line per episode.

    nice -n 10 python benchmarks/robot_branch_auc.py --seeds 0 8 1 2 3 4 --rounds 3 --groups 8
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from robot_shadow_auc import aucs, bootstrap

AGE_BANDS = ((1, 2), (3, 4), (5, 99))


def run_seed(seed: int, rounds: int, groups: int, shadow: str) -> list[dict]:
    from wmrl_env import RewardFusion, WorldModelVectorEnv
    from wmrl_env.bench.robotics import RobotBenchConfig
    from wmrl_env.bench.robotics.runner import imagination
    from wmrl_env.bench.robotics.start import base_policy, make_task_env, prepare_seed
    from wmrl_env.bench.runner import grpo_config
    from wmrl_env.env_executors import GymEnvExecutor
    from wmrl_env.grpo import train
    from wmrl_env.wrappers import BranchStarts

    config = RobotBenchConfig.full(arms=("real",), iterations=rounds, num_groups=groups,
                                   shadow=shadow, cache_dir="runs/base_policy")  # fmt: skip
    start = prepare_seed(config, seed)
    world_model = start.world_model(config)
    policy, _ = base_policy(config, seed)

    def env_fn():
        return make_task_env(config.task, start.horizon, start.chunk_size)

    executor = GymEnvExecutor(env_fn, backend="thread", num_workers=1, max_envs=1)
    envs = WorldModelVectorEnv(
        env_fn, world_model, groups, config.group_size, executor=executor, task="dynamics",
        fusion=RewardFusion(method="real", anchor_fraction=config.anchor_fraction, seed=seed),
        max_episode_steps=start.episode_chunks,
        branch_starts=BranchStarts(groups // 2, seed=seed),
        **imagination(config, "real", policy),
    )  # fmt: skip
    rows: list[dict] = []
    played = {"round": 0}

    def on_round(rollout) -> None:
        played["round"] += 1
        info = rollout.final_info
        for i, real in enumerate(np.asarray(info["real_score"], np.float64)):
            if np.isfinite(real) and info["wm_valid"][i]:
                rows.append({"seed": seed, "round": played["round"],
                             "group": int(info["group_id"][i]), "success": bool(real > 0),
                             "start_age": int(info["start_age"][i]),
                             "length": int(info["episode_length"][i]),
                             "closed": float(info["wm_score"][i])})  # fmt: skip

    try:
        train(envs, policy, grpo_config(config, seed), on_round=on_round)
    finally:
        envs.close()
    return rows


def table_row(name: str, rows: list[dict], rng: np.random.Generator) -> str:
    if not rows:
        return f"| {name} | 0 | | | | |"
    (pooled, within), (low, high) = aucs(rows, "closed"), bootstrap(rows, "closed", rng)
    successes = sum(r["success"] for r in rows)
    groups = len({(r["seed"], r["round"], r["group"]) for r in rows})
    length = np.mean([r["length"] for r in rows])
    return (f"| {name} | {len(rows)} ({groups} groups) | {successes / len(rows):.3f} "
            f"| {length:.1f} | {pooled:.3f} [{low[0]:.3f}, {high[0]:.3f}] "
            f"| {within:.3f} [{low[1]:.3f}, {high[1]:.3f}] |")  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 8])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--groups", type=int, default=8)
    parser.add_argument("--shadow", choices=("closed", "open"), default="closed")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    done = [json.loads(line) for line in args.out.read_text().splitlines()] if (
        args.out and args.out.exists()) else []  # fmt: skip
    rows = list(done)
    for seed in args.seeds:
        if any(r["seed"] == seed for r in done):
            continue  # resumable: a seed already in --out is read, not run again
        new = run_seed(seed, args.rounds, args.groups, args.shadow)
        rows += new
        if args.out:
            with args.out.open("a") as file:
                file.write("".join(json.dumps(r) + "\n" for r in new))
        print(f"seed {seed}: {len(rows)} episodes so far", flush=True)
    rows = [r for r in rows if r["seed"] in args.seeds]
    rng = np.random.default_rng(0)
    print("\n| groups | real episodes | success | chunks played | pooled AUC (95 % CI) "
          "| within-group AUC (95 % CI) |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    later = [r for r in rows if r["round"] > 1]  # round 1 has nothing to branch from
    print(table_row("fresh, from the start (rounds 2+)",
                    [r for r in later if r["start_age"] == 0], rng))  # fmt: skip
    print(table_row("branched, from a real state (rounds 2+)",
                    [r for r in later if r["start_age"] > 0], rng))  # fmt: skip
    for low, high in AGE_BANDS:
        band = [r for r in later if low <= r["start_age"] <= high]
        print(table_row(f"branched, {low}-{min(high, 8)} chunks in", band, rng))
    print(table_row("all groups, round 1 (fresh)", [r for r in rows if r["round"] == 1], rng))


if __name__ == "__main__":
    main()
