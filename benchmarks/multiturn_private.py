"""The scripted reviser's private-test gain after K turns on the second suite's held-out tasks.

Each episode is played live (validation score as the reward, ``reward="final"``); the first
turn's program is then run alone (a one-turn episode from the same start) so both private
scores are real. Prints the mean gain (final private minus first turn's private) with a
bootstrap interval over tasks and starts. Episodes are appended to ``--out`` and skipped
when rerun, so an interrupted run resumes.

Example:
    nice python benchmarks/multiturn_private.py --starts 3 --turns 4 --out runs/mt_private.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence

import numpy as np

from wmrl_env.envs.ml_tasks.multiturn import MLTaskMultiTurnEnv
from wmrl_env.envs.ml_tasks.reviser import ScriptedReviser, play_episode

HELDOUT = (
    "hr_categories_s0",
    "hr_interactions_s0",
    "hr_missing_s0",
    "hr_outliers_s0",
    "hr_periodic_s0",
    "hr_wide_linear_s0",
)


def play(task: str, seed: int, turns: int) -> dict[str, object]:
    """One live episode of the reviser from start ``seed``: its validation and private scores."""
    env = MLTaskMultiTurnEnv(tasks=[task], executor="local", max_turns=turns, reward="final")
    steps = play_episode(env, ScriptedReviser(seed=seed), seed=seed)
    env.close()
    info = steps[-1][4]
    return {
        "task": task,
        "seed": seed,
        "turns": turns,
        "executions": len(env.reports),
        "valid_final": steps[-1][1],
        "valid_first": steps[0][4]["score"],
        "private": info["private_score"],
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=3, help="start seeds per task")
    parser.add_argument("--turns", type=int, default=4, help="K, the turns per episode")
    parser.add_argument("--out", default="runs/mt_private.jsonl")
    args = parser.parse_args(argv)
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    done = {}
    if os.path.exists(args.out):
        with open(args.out) as previous:
            for line in previous:
                row = json.loads(line)
                done[(row["task"], row["seed"], row["turns"])] = row
    with open(args.out, "a") as out:
        for task in HELDOUT:
            for seed in range(args.starts):
                for turns in (1, args.turns):
                    if (task, seed, turns) not in done:
                        row = play(task, seed, turns)
                        done[(task, seed, turns)] = row
                        out.write(json.dumps(row) + "\n")
                        out.flush()
    gains = np.array(
        [
            [
                (done[(t, s, args.turns)]["private"] or 0.0) - (done[(t, s, 1)]["private"] or 0.0)
                for s in range(args.starts)
            ]
            for t in HELDOUT
        ]
    )
    rng = np.random.default_rng(0)
    boot = []
    for _ in range(2000):  # tasks, then starts within each drawn task
        rows = gains[rng.integers(len(HELDOUT), size=len(HELDOUT))]
        cols = rng.integers(args.starts, size=rows.shape)
        boot.append(np.take_along_axis(rows, cols, axis=1).mean())
    low, high = np.quantile(boot, [0.025, 0.975])
    execs = sum(row["executions"] for row in done.values())
    print(
        f"private gain after {args.turns} turns over turn 1: {gains.mean():.3f} "
        f"[{low:.3f}, {high:.3f}] ({len(HELDOUT)} tasks x {args.starts} starts, "
        f"{execs} live executions)"
    )
    for t, row in zip(HELDOUT, gains, strict=True):
        print(f"  {t}: {row.mean():+.3f}")


if __name__ == "__main__":
    main()
