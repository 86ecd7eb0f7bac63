"""The scripted reviser's private-test gain after K turns on the second suite's held-out tasks.

Each episode is played live (validation score as the reward, ``reward="final"``; or, with
``--executor replay``, answered from the pool tables' recorded real runs); the first
turn's program is then run alone (a one-turn episode from the same start) so both private
scores are real. Prints the mean gain (final private minus first turn's private) with a
bootstrap interval over tasks and starts, per task and per task family. Episodes are appended
to ``--out`` with every turn (the observation before it, the program, the real report) and
skipped when rerun, so an interrupted run resumes; each line is stamped with what it was made
with (the executor and the package version), and a log made otherwise, or not stamped, is
refused (``StaleRunLog``, exit 2) before any episode is played.

``--fidelity VERSION`` runs nothing new: it asks the simulator over ML world model
``VERSION`` (e.g. ``v4``) for every recorded real turn of the K-turn episodes (stamped or
not), from the real observation before it, and prints its fidelity per turn (status accuracy
against the all-ok baseline, error-class accuracy on real failures, score Spearman)
(:mod:`wmrl_env.bench.multiturn_private`).

Example:
    nice python benchmarks/multiturn_private.py --tasks pool --starts 4 --turns 4 \\
        --out runs/mt_private_pool.jsonl
    nice python benchmarks/multiturn_private.py --tasks pool --starts 4 --turns 4 \\
        --out runs/mt_private_pool.jsonl --fidelity v4
    nice python benchmarks/multiturn_private.py --tasks pool --starts 20 --turns 4 \\
        --executor replay --out runs/mt_private_pool_replay.jsonl
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from wmrl_env.bench.multiturn_private import (
    SUITES,
    bootstrap_interval,
    fidelity_markdown,
    play_starts,
    private_gains,
    turn_fidelity,
)
from wmrl_env.bench.run_log import StaleRunLog, append_line, fingerprint, read_lines, read_stamped


def main(argv: Sequence[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", choices=tuple(SUITES), default="generated",
                        help="generated: hr_*_s0; pool: those and the real-data rd_*")  # fmt: skip
    parser.add_argument("--starts", type=int, default=3, help="start seeds per task")
    parser.add_argument("--turns", type=int, default=4, help="K, the turns per episode")
    parser.add_argument("--out", default="runs/mt_private.jsonl")
    parser.add_argument("--executor", choices=("live", "replay"), default="live",
                        help="live: the local sandbox; replay: the pool tables' recorded "
                        "real runs of the same programs")  # fmt: skip
    parser.add_argument("--fidelity", default=None, metavar="VERSION",
                        help="measure the simulator over this ML world model on the recorded "
                        "turns instead of playing (no new execution)")  # fmt: skip
    args = parser.parse_args(argv)
    tasks = SUITES[args.tasks]
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    made_with = fingerprint({"executor": args.executor}, resumable=())
    done: dict[tuple[str, int, int], dict] = {}
    if args.fidelity is None:  # new episodes join only a log made the same way
        rows = read_stamped(Path(args.out), made_with)
    else:  # reads the recorded turns, runs nothing
        rows = [row for _, row in read_lines(Path(args.out))]
    for row in rows:
        done[(row["task"], row["seed"], row["turns"])] = row
    if args.fidelity is not None:
        from wmrl_env.world_models.programs.ml_default import load_ml_world_model

        records = [done[key] for key in sorted(done) if key[0] in tasks]
        text = fidelity_markdown(turn_fidelity(records, load_ml_world_model(args.fidelity)))
        print(text)
        return text
    lengths = {1, args.turns}
    missing = any((t, seed, k) not in done for t in tasks for seed in range(args.starts)
                  for k in lengths)  # fmt: skip
    executor = "local"
    if args.executor == "replay" and missing:  # the tables are read only when needed
        from wmrl_env.envs.ml_tasks.pool import pool_replay_executor

        executor = pool_replay_executor()
    for task in tasks:
        skip = [(seed, k) for (t, seed, k) in done if t == task]
        for row in play_starts(task, range(args.starts), args.turns, skip=skip,
                               executor=executor):  # fmt: skip
            done[(task, row["seed"], row["turns"])] = row
            append_line(Path(args.out), {**row, "made_with": made_with})
    gains = private_gains(done, tasks, args.starts, args.turns)
    mean, (low, high) = bootstrap_interval(gains)
    execs = sum(row["executions"] for key, row in done.items()
                if key[0] in tasks and key[1] < args.starts)  # fmt: skip
    lines = [
        f"private gain after {args.turns} turns over turn 1: {mean:+.3f} "
        f"[{low:+.3f}, {high:+.3f}] ({len(tasks)} tasks x {args.starts} starts, "
        f"{execs} {'replayed' if args.executor == 'replay' else 'live'} executions)"
    ]
    ran = np.array([[done[(t, s, 1)]["steps"][0]["status"] == "ok" if "steps" in done[(t, s, 1)]
                     else True for s in range(args.starts)] for t in tasks])  # fmt: skip
    if ran.any() and not ran.all():
        part, (p_low, p_high) = bootstrap_interval(np.where(ran, gains, np.nan))
        lines.append(f"  starts whose first program ran ({int(ran.sum())}): {part:+.3f} "
                     f"[{p_low:+.3f}, {p_high:+.3f}]")  # fmt: skip
    for prefix in ("hr_", "rd_"):
        rows = [i for i, t in enumerate(tasks) if t.startswith(prefix)]
        if rows and len(rows) < len(tasks):
            part, (p_low, p_high) = bootstrap_interval(gains[rows])
            lines.append(f"  {prefix}*: {part:+.3f} [{p_low:+.3f}, {p_high:+.3f}]")
    for task, row in zip(tasks, gains, strict=True):
        lines.append(f"  {task}: {row.mean():+.3f} (" + ", ".join(f"{g:+.3f}" for g in row) + ")")
    text = "\n".join(lines)
    print(text)
    return text


if __name__ == "__main__":
    try:
        main()
    except StaleRunLog as error:
        print(f"multiturn_private: {error}", file=sys.stderr)
        sys.exit(2)
