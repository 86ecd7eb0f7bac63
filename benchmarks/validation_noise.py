"""Fixed validation split or repeated K-fold for the reward: noise against cost.

On a few generated tasks, runs a handful of pool programs under the fixed split (one
execution per program: fit on 1,500 public rows, reward on 500) and under 5-fold
cross-validation of the same 2,000 public rows (five executions per program), live in the
warm local sandbox, resumably (one JSON-lines table per scheme under ``--out``). Every
execution also scores the 6,000 private rows; a program's *quality* is its mean private
score over all six fits. Reported per task: the Spearman correlation of each scheme's reward
with that quality, and the executions it costs.

    WMRL_ALLOW_WEAK_ISOLATION=1 PYTHONPATH=. nice -n 10 python benchmarks/validation_noise.py
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from wmrl_env.envs.ml_tasks.headroom import headroom_task
from wmrl_env.envs.ml_tasks.pool import build_pool, pool_programs, read_pool
from wmrl_env.envs.ml_tasks.sandbox import default_sandbox

TASKS = ("hr_missing_s0", "hr_categories_s0", "hr_outliers_s0")
FOLDS = 5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/figures/validation_noise")
    parser.add_argument("--tasks", nargs="+", default=list(TASKS))
    parser.add_argument("--every", type=int, default=8, help="every n-th pool program")
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    programs = pool_programs(48)[:: args.every]
    schemes = {"fixed": None, **{f"fold{k}": (0, k, FOLDS) for k in range(FOLDS)}}
    out = Path(args.out)
    with default_sandbox(max_workers=args.workers, warm=True, suite_programs=True) as sandbox:
        for scheme, fold in schemes.items():
            tasks = [headroom_task(t, fold=fold) for t in args.tasks]
            build_pool(sandbox, tasks, programs, out / f"{scheme}.jsonl")
    tables = {scheme: read_pool(out / f"{scheme}.jsonl") for scheme in schemes}
    print(json.dumps(report(tables, args.tasks, [p.id for p in programs]), indent=1))


def report(tables: dict, tasks: list[str], programs: list[str]) -> dict:
    result = {}
    for task in tasks:
        scores = {}  # program -> scheme -> (valid, private)
        seconds = []
        for scheme, rows in tables.items():
            for row in rows:
                if row["task_id"] == task and row["status"] == "ok":
                    scores.setdefault(row["program_id"], {})[scheme] = (
                        row["valid_raw"],
                        row["private_raw"],
                    )
                    seconds.append(row["exec_seconds"])
        complete = [p for p in programs if len(scores.get(p, {})) == len(tables)]
        quality = [np.mean([v[1] for v in scores[p].values()]) for p in complete]
        fixed = [scores[p]["fixed"][0] for p in complete]
        kfold = [np.mean([scores[p][f"fold{k}"][0] for k in range(FOLDS)]) for p in complete]
        fixed_private = [scores[p]["fixed"][1] for p in complete]
        result[task] = {
            "programs": len(complete),
            "spearman_fixed_vs_quality": round(float(spearmanr(fixed, quality).statistic), 3),
            "spearman_kfold_vs_quality": round(float(spearmanr(kfold, quality).statistic), 3),
            "spearman_fixed_valid_vs_own_private": round(
                float(spearmanr(fixed, fixed_private).statistic), 3
            ),
            "executions_per_program": {"fixed": 1, "kfold": FOLDS},
            "mean_exec_seconds": round(float(np.mean(seconds)), 2) if seconds else None,
        }
    return result


if __name__ == "__main__":
    main()
