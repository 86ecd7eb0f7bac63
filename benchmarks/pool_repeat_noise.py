"""How much a real run of the same program on the same task varies: programs of the
pretraining pool table run again, live, and compared with the table's recorded run.

The pool suite's programs fix their random seeds, so a second run should report the same
scores; what can differ is timing (a run near the time limit) and the machine. The report
gives, over the pairs (table run, new run): how often the status agrees, the share of ok
pairs whose validation metric is identical, the RMS and largest difference of the reward
(validation score normalised per task: trivial baseline 0, the metric's ideal 1, a failure
0), and the noise ceiling of a within-group ranking (the Spearman of one run's rewards
against the other's in random groups of 8 programs of one task, as GRPO forms them).
Only pretraining tasks (seed 1) are run; the new runs go to ``--out`` (resumable: run the
same command again and only what is missing runs). The committed second runs are
``envs/ml_tasks/data/pool_pretrain_repeat_v1.jsonl`` (2026-12-06, 2 workers on 2 shared
cores); with it as ``--out`` nothing runs and the report is read from it:

    python benchmarks/pool_repeat_noise.py --out envs/ml_tasks/data/pool_pretrain_repeat_v1.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

TABLE = Path(__file__).resolve().parents[1] / "envs/ml_tasks/data/pool_pretrain_v1.jsonl"
GROUP_SIZE = 8


def pairs(first: list[dict], second: list[dict]) -> list[tuple[dict, dict]]:
    recorded = {(r["task_id"], r["program_id"]): r for r in first if r["status"] != "error"}
    return [(recorded[(r["task_id"], r["program_id"])], r) for r in second
            if r["status"] != "error" and (r["task_id"], r["program_id"]) in recorded]  # fmt: skip


def reward(row: dict, task) -> float:
    from wmrl_env.envs.ml_tasks.scoring import normalised_score

    if row["status"] != "ok" or row["valid_raw"] is None:
        return 0.0
    return normalised_score(float(row["valid_raw"]), baseline=task.baseline,
                            reference=task.reference)  # fmt: skip


def group_ceiling(by_task: dict[str, list[tuple[float, float]]], seed: int = 0) -> float:
    """Mean within-group Spearman of run 1 against run 2 (groups of 8 of one task, each
    task's programs shuffled 20 times; groups where either run ties everything skipped)."""
    from scipy.stats import spearmanr

    rng = np.random.default_rng(seed)
    rhos = []
    for values in by_task.values():
        values = np.array(values)
        for _ in range(20):
            order = rng.permutation(len(values))
            for start in range(0, len(order) - GROUP_SIZE + 1, GROUP_SIZE):
                a, b = values[order[start : start + GROUP_SIZE]].T
                if np.ptp(a) > 0 and np.ptp(b) > 0:
                    rhos.append(spearmanr(a, b).statistic)
    return float(np.mean(rhos)) if rhos else math.nan


def report(first: list[dict], second: list[dict]) -> dict:
    from wmrl_env.envs.ml_tasks.pool_tasks import private_test_task

    matched = pairs(first, second)
    tasks = {t: private_test_task(t) for t in {a["task_id"] for a, _ in matched}}
    same_status = [a["status"] == b["status"] for a, b in matched]
    ok = [(a, b) for a, b in matched if a["status"] == b["status"] == "ok"]
    identical = [a["valid_raw"] == b["valid_raw"] for a, b in ok]
    rewards = np.array([(reward(a, tasks[a["task_id"]]), reward(b, tasks[a["task_id"]]))
                        for a, b in matched])  # fmt: skip
    by_task: dict[str, list[tuple[float, float]]] = {}
    for (a, _), pair in zip(matched, rewards, strict=True):
        by_task.setdefault(a["task_id"], []).append(tuple(pair))
    difference = rewards[:, 0] - rewards[:, 1]
    flips = [(a["task_id"], a["program_id"], a["status"], b["status"])
             for (a, b), same in zip(matched, same_status, strict=True) if not same]  # fmt: skip
    return {
        "pairs": len(matched),
        "status_agreement": float(np.mean(same_status)),
        "ok_pairs": len(ok),
        "identical_metric_share": float(np.mean(identical)) if ok else math.nan,
        "reward_rms_difference": float(np.sqrt(np.mean(difference**2))),
        "reward_max_abs_difference": float(np.abs(difference).max()),
        "repeat_noise_variance": float(np.mean(difference**2) / 2),
        "within_group_spearman_ceiling": group_ceiling(by_task),
        "status_flips": flips,
    }


def main() -> None:
    from wmrl_env.envs.ml_tasks.pool import build_pool, pool_programs, read_pool
    from wmrl_env.envs.ml_tasks.pool_tasks import private_test_task
    from wmrl_env.envs.ml_tasks.sandbox import default_sandbox

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="JSON-lines table of the new runs")
    parser.add_argument("--every", type=int, default=4, help="run every k-th pool program")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--report", help="write the figures to this JSON file as well")
    args = parser.parse_args()
    first = read_pool(TABLE)
    tasks = sorted({r["task_id"] for r in first if r["task_id"].endswith("_s1")})
    programs = pool_programs(56, seed=1)[:: args.every]
    with default_sandbox(max_workers=args.workers, warm=True, suite_programs=True) as sandbox:
        build_pool(sandbox, [private_test_task(t) for t in tasks], programs, args.out,
                   progress=True)  # fmt: skip
    figures = report(first, read_pool(args.out))
    text = json.dumps(figures, indent=1)
    print(text)
    if args.report:
        Path(args.report).write_text(text + "\n")


if __name__ == "__main__":
    main()
