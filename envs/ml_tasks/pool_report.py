"""Per-task noise and headroom of a pool table (see :mod:`~.pool`), read on private scores.

Scores are normalised per task on the private test: the trivial baseline 0, the pool's best
program 1 (the pool's, not the space's). Per task:

* ``spearman``: validation vs private score over the programs that ran (the noise ceiling
  of any reward computed on validation rows);
* ``validation_search``: the private score of the program with the best validation score
  (what exhaustive validation search over the pool deploys);
* ``best_constant``: the private score of the one program, the same for every task, with
  the best mean normalised *validation* score over the *other* tasks (never this task's
  scores, never a private score);
* ``random_16``: the expected private score of the best-by-validation program among 16
  programs drawn at random from the pool (random search at 16 executions);
* ``first_suite_best``: the best private score among the first suite's 72 programs.

A failed execution scores 0 and is never chosen by validation.

    python -m wmrl_env.envs.ml_tasks.pool_report envs/ml_tasks/data/pool_v2.jsonl
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .grammar import v1_subset
from .pool import read_pool, within_task_spearman
from .pool_tasks import private_test_task
from .scoring import normalised_score

__all__ = ["markdown", "normalised_scores", "summarise"]

RANDOM_BUDGET = 16


def summarise(
    rows: Sequence[Mapping[str, Any]], *, draws: int = 4000, seed: int = 0
) -> dict[str, dict[str, float]]:
    """The per-task figures of the module docstring, for the programs every task holds."""
    by_task, programs, valid, private = normalised_scores(rows)
    named = {p.id for p in v1_subset()}
    rng = np.random.default_rng(seed)
    spearman = within_task_spearman([r for r in rows if r["program_id"] in set(programs)])
    summary = {}
    for task_id in sorted(by_task):
        others = [valid[t] for t in by_task if t != task_id]
        constant = int(np.argmax(np.mean(others, axis=0))) if others else 0
        picks = np.array([rng.permutation(len(programs))[:RANDOM_BUDGET] for _ in range(draws)])
        chosen = picks[np.arange(draws), np.argmax(valid[task_id][picks], axis=1)]
        summary[task_id] = {
            "programs": len(programs),
            "ok": int(sum(by_task[task_id][p]["status"] == "ok" for p in programs)),
            "spearman": spearman.get(task_id, math.nan),
            "validation_search": float(private[task_id][np.argmax(valid[task_id])]),
            "best_constant": float(private[task_id][constant]),
            "random_16": float(private[task_id][chosen].mean()),
            "first_suite_best": float(
                max(s for p, s in zip(programs, private[task_id], strict=True) if p in named)
            ),
            "constant_program": programs[constant],
        }
    return summary


def normalised_scores(
    rows: Sequence[Mapping[str, Any]],
) -> tuple[
    dict[str, dict[str, Mapping[str, Any]]], list[str], dict[str, np.ndarray], dict[str, np.ndarray]
]:
    """``(rows by task and program, the programs every task holds (sorted), validation
    scores, private scores)``: per task, each program's score normalised on its own rows
    (trivial baseline 0, the pool's best on those rows 1; a failed execution 0)."""
    by_task: dict[str, dict[str, Mapping[str, Any]]] = {}
    for row in rows:
        by_task.setdefault(row["task_id"], {})[row["program_id"]] = row
    programs = sorted(set.intersection(*(set(p) for p in by_task.values()))) if by_task else []
    valid, private = {}, {}
    for task_id, table in by_task.items():
        task = private_test_task(task_id)
        raw_private = [_raw(table[p], "private_raw") for p in programs]
        raw_valid = [_raw(table[p], "valid_raw") for p in programs]
        best_private = _best(raw_private, task.metric)
        best_valid = _best(raw_valid, task.metric)
        private[task_id] = np.array(
            [_norm(r, task.private_baseline, best_private) for r in raw_private]
        )
        valid[task_id] = np.array([_norm(r, task.baseline, best_valid) for r in raw_valid])
    return by_task, programs, valid, private


def _raw(row: Mapping[str, Any], column: str) -> float:
    value = row.get(column)
    return math.nan if row["status"] != "ok" or value is None else float(value)


def _best(values: Sequence[float], metric: str) -> float:
    from .scoring import METRICS

    finite = [v for v in values if not math.isnan(v)]
    return (max if METRICS[metric].higher_is_better else min)(finite)


def _norm(raw: float, baseline: float, best: float) -> float:
    return 0.0 if math.isnan(raw) else normalised_score(raw, baseline=baseline, reference=best)


def markdown(summary: Mapping[str, Mapping[str, Any]]) -> str:
    """The summary as a Markdown table with a mean row."""
    columns = ("spearman", "validation_search", "random_16", "first_suite_best", "best_constant")
    lines = [
        "| task | programs (ok) | val-private Spearman | validation search | random search "
        "at 16 | best of the 72 | best constant |",
        "|---|---|---|---|---|---|---|",
    ]
    for task_id, row in summary.items():
        cells = " | ".join(f"{row[c]:.3f}" for c in columns)
        lines.append(f"| {task_id} | {row['programs']} ({row['ok']}) | {cells} |")
    means = " | ".join(f"{np.mean([r[c] for r in summary.values()]):.3f}" for c in columns)
    lines.append(f"| mean | | {means} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m wmrl_env.envs.ml_tasks.pool_report",
        description="Per-task noise (validation vs private Spearman) and private headroom of "
        "a pool table.",
    )
    parser.add_argument("table", help="the pool's JSON-lines table")
    args = parser.parse_args(argv)
    rows = read_pool(args.table)
    if not rows:
        parser.error(f"{args.table}: no rows")
    summary = summarise(rows)
    print(markdown(summary))
    for task_id, row in summary.items():
        print(f"{task_id}: best constant program {row['constant_program']}")


if __name__ == "__main__":
    main()
