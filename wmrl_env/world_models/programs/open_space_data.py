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

__all__ = ["TrainingRows", "default_pretraining_table", "pool_training_rows"]


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
    tasks) would be read."""
    from wmrl_env.envs.ml_tasks.grammar import GrammarProgram
    from wmrl_env.envs.ml_tasks.headroom import headroom_task
    from wmrl_env.envs.ml_tasks.pool import POOL_TASKS, read_pool
    from wmrl_env.envs.ml_tasks.scoring import METRICS, normalised_score
    from wmrl_env.world_models.outcomes import observed_status
    from wmrl_env.world_models.programs.status_model import status_label

    rows = [r for r in read_pool(path) if r["status"] != "error"]
    available = sorted({r["task_id"] for r in rows})
    wanted = available if tasks is None else list(tasks)
    forbidden = sorted(set(wanted) & set(POOL_TASKS if exclude is None else exclude))
    if forbidden:
        raise ValueError(f"tasks {forbidden} are held out: no world model may train on them")
    missing = sorted(set(wanted) - set(available))
    if missing:
        raise ValueError(f"tasks {missing} are not in the pool table {path}")
    out: dict[str, list] = {k: [] for k in ("task", "text", "program", "label", "score")}
    for task_id in wanted:
        task = headroom_task(task_id)
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
