"""The open-space world model's training rows, read from a pool table.

:func:`pool_training_rows` reads a pool table (:mod:`~wmrl_env.envs.ml_tasks.pool`) into
one :class:`TrainingRows`: per execution its task, the program's text as the task's kind
renders it, the contract status (:func:`~wmrl_env.world_models.outcomes.observed_status`,
a crash with its error class) and the validation score normalised per task (trivial
baseline 0, the best program of the table on that task 1; NaN unless ``ok``). Only the
tasks asked for are read: a pretraining table never holds a held-out task, and
:func:`pool_training_rows` refuses any task of ``exclude`` (the second suite's held-out
tasks by default).

Example:
    >>> rows = pool_training_rows(default_pretraining_table(), tasks=["hr_missing_s1"])
    >>> set(rows.task_ids), bool(np.nanmax(rows.score) == 1.0)
    ({'hr_missing_s1'}, True)
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = [
    "TrainingRows",
    "concat_rows",
    "default_pretraining_table",
    "pool_training_rows",
    "table_training_rows",
]


def default_pretraining_table() -> Path:
    """The committed pretraining table (generated tasks of seeds 1 and 2)."""
    from wmrl_env.envs import ml_tasks

    return Path(ml_tasks.__file__).resolve().parent / "data" / "pool_pretrain_v1.jsonl"


@dataclass(frozen=True)
class TrainingRows:
    """Executions of a pool table, one entry per row (see the module doc)."""

    task_ids: tuple[str, ...]
    descriptions: tuple[str, ...]
    programs: tuple[str, ...]
    labels: tuple[str, ...]
    """:func:`~wmrl_env.world_models.programs.status_model.status_label` of each execution"""
    score: np.ndarray
    """normalised validation score given ``ok`` (NaN otherwise)"""

    def __len__(self) -> int:
        return len(self.task_ids)

    @property
    def reward(self) -> np.ndarray:
        """The bench's reward: the score, a failed run 0."""
        return np.where(np.isfinite(self.score), self.score, 0.0)


def pool_training_rows(
    path: str | os.PathLike[str],
    tasks: Sequence[str] | None = None,
    exclude: Sequence[str] | None = None,
) -> TrainingRows:
    """The rows of ``tasks`` (default: every task of the table) in the table at ``path``;
    raises ``ValueError`` when a task of ``exclude`` (default: the second suite's held-out
    tasks, generated and real-data) would be read."""
    from wmrl_env.envs.ml_tasks.grammar import GrammarProgram
    from wmrl_env.envs.ml_tasks.pool import POOL_TASKS, REAL_POOL_TASKS, read_pool
    from wmrl_env.envs.ml_tasks.pool_tasks import private_test_task
    from wmrl_env.envs.ml_tasks.scoring import METRICS, normalised_score
    from wmrl_env.world_models.outcomes import observed_status
    from wmrl_env.world_models.programs.status_model import status_label

    rows = [r for r in read_pool(path) if r["status"] != "error"]
    available = sorted({r["task_id"] for r in rows})
    wanted = available if tasks is None else list(tasks)
    forbidden = sorted(
        set(wanted) & set((*POOL_TASKS, *REAL_POOL_TASKS) if exclude is None else exclude)
    )
    if forbidden:
        raise ValueError(f"tasks {forbidden} are held out: no world model may train on them")
    missing = sorted(set(wanted) - set(available))
    if missing:
        raise ValueError(f"tasks {missing} are not in the pool table {path}")
    out: dict[str, list] = {k: [] for k in ("task", "text", "program", "label", "score")}
    for task_id in wanted:
        task = private_test_task(task_id)
        mine = [r for r in rows if r["task_id"] == task_id]
        better = max if METRICS[task.metric].higher_is_better else min
        best = better(r["valid_raw"] for r in mine if r["status"] == "ok")
        for row in mine:
            program = GrammarProgram.from_id(row["program_id"]).render(task.kind)
            status, error = observed_status(row["status"], row.get("message", ""), program)
            ok = status == "ok" and row["valid_raw"] is not None
            score = (
                normalised_score(float(row["valid_raw"]), baseline=task.baseline, reference=best)
                if ok
                else math.nan
            )
            out["task"].append(task_id)
            out["text"].append(task.description)
            out["program"].append(program)
            out["label"].append(status_label(status, error))
            out["score"].append(score)
    return TrainingRows(
        tuple(out["task"]), tuple(out["text"]), tuple(out["program"]), tuple(out["label"]),
        np.array(out["score"], dtype=np.float64),
    )  # fmt: skip


def table_training_rows(
    splits: Sequence[str] = ("wm", "train"),
    table: str | os.PathLike[str] | None = None,
    real_only: bool = True,
) -> TrainingRows:
    """The first suite's executions of the tasks of ``splits`` (its 72 grid programs, the
    same text as the open space's points), read like a pool table: the contract status and
    the score normalised per task (the table's score, divided by the best ``ok`` one of the
    task, clipped to [0, 1]). The first suite's ``heldout`` split is refused; with
    ``real_only`` its synthetic tasks are left out."""
    from wmrl_env.envs.ml_tasks.registry import get_task, manifest_entry, task_ids
    from wmrl_env.envs.ml_tasks.tables import load_table
    from wmrl_env.world_models.outcomes import observed_status
    from wmrl_env.world_models.programs.status_model import status_label

    if "heldout" in splits:
        raise ValueError(
            "the first suite's heldout split is held out: no world model may train on it"
        )
    executions = load_table(table)
    out: dict[str, list] = {k: [] for k in ("task", "text", "program", "label", "score")}
    for task_id in [t for split in splits for t in task_ids(split)]:
        if real_only and manifest_entry(task_id)["source"] == "synthetic":
            continue
        mine = [r for r in executions.for_task(task_id) if r.status != "error"]
        scores = np.array([r.score if r.status == "ok" else np.nan for r in mine], dtype=float)
        if not mine or not np.isfinite(scores).any() or np.nanmax(scores) <= 0:
            continue
        description = get_task(task_id).description
        best = np.nanmax(scores)
        for row, score in zip(mine, scores, strict=True):
            program = row.program()
            status, error = observed_status(row.status, row.message, program)
            out["task"].append(task_id)
            out["text"].append(description)
            out["program"].append(program)
            out["label"].append(status_label(status, error))
            out["score"].append(min(1.0, max(0.0, score / best)) if status == "ok" else math.nan)
    return TrainingRows(
        tuple(out["task"]), tuple(out["text"]), tuple(out["program"]), tuple(out["label"]),
        np.array(out["score"], dtype=np.float64),
    )  # fmt: skip


def concat_rows(*parts: TrainingRows) -> TrainingRows:
    """One :class:`TrainingRows` of several, in order."""
    return TrainingRows(
        tuple(t for p in parts for t in p.task_ids),
        tuple(t for p in parts for t in p.descriptions),
        tuple(t for p in parts for t in p.programs),
        tuple(t for p in parts for t in p.labels),
        np.concatenate([p.score for p in parts]),
    )
