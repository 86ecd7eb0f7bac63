"""Held-out real executions to measure a world model against: the suite's table, the second
suite's pool table, or a log.

A :class:`Cases` holds one row per real execution: the task, the context the world model
reads, the program, the contract status (:func:`~wmrl_env.world_models.outcomes.observed_status`:
``ok``, ``does_not_parse``, ``crashed`` with its error class, ``timeout``,
``invalid_output``) and the score of an ``ok`` run. Infrastructure failures (``error``) say
nothing about a program and are left out (counted in ``skipped``).

Example:
    >>> cases = suite_cases(tasks=["cardata_un"])
    >>> len(cases), sorted(str(s) for s in set(cases.status))
    (72, ['crashed', 'ok'])
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from wmrl_env.world_models.outcomes import observed_status

__all__ = ["Cases", "log_cases", "pool_cases", "suite_cases", "suite_context"]


@dataclass(frozen=True)
class Cases:
    """Real executions, one per row (every array has the same length).

    Attributes:
        task_ids, contexts, programs: what ran where, and what the world model reads.
        status: the contract status of each run.
        error: the error class of a crash (``""`` otherwise).
        score: the real score of an ``ok`` run (NaN otherwise).
        source: where the rows came from (for the report).
        skipped: rows left out and why (reason -> count).
    """

    task_ids: list[str]
    contexts: list[Any]
    programs: list[str]
    status: np.ndarray
    error: np.ndarray
    score: np.ndarray
    source: str = ""
    skipped: dict[str, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.programs)

    def subset(self, rows: np.ndarray | Sequence[int]) -> Cases:
        rows = np.asarray(rows, dtype=int)
        return Cases(
            [self.task_ids[i] for i in rows], [self.contexts[i] for i in rows],
            [self.programs[i] for i in rows], self.status[rows], self.error[rows],
            self.score[rows], self.source, dict(self.skipped),
        )  # fmt: skip

    def reward(self, failure_score: float) -> np.ndarray:
        """The reward each run earned: its score when ``ok``, else ``failure_score``."""
        return np.where(self.status == "ok", self.score, float(failure_score))


def _build(rows: list[tuple[str, Any, str, str, str, float]], source: str, skipped) -> Cases:
    if not rows:
        raise ValueError(f"{source}: no executions to measure against")
    tasks, contexts, programs, status, error, score = (
        list(column) for column in zip(*rows, strict=True)
    )
    return Cases(
        tasks, contexts, programs, np.array(status, dtype=str), np.array(error, dtype=object),
        np.array(score, dtype=np.float64), source, dict(skipped),
    )  # fmt: skip


def suite_context(task_id: str) -> Any:
    """The context the ML world models read for a task of the suite: its description."""
    from wmrl_env.envs.ml_tasks import get_task

    return get_task(task_id).description


def suite_cases(split: str = "heldout", tasks: Sequence[str] | None = None) -> Cases:
    """Every row of the committed execution table on ``tasks`` (default: the tasks of
    ``split``, comma-separated splits allowed)."""
    from wmrl_env.envs.ml_tasks import load_table, registry

    table = load_table()
    if tasks is None:
        tasks = [t for part in split.split(",") for t in registry.task_ids(part.strip())]
    unknown = sorted(set(tasks) - set(table.task_ids))
    if unknown:
        raise ValueError(f"the execution table has no rows for tasks {unknown}")
    rows = []
    for row in table.with_text(tasks):
        status, error = observed_status(row["status"], row["message"], row["program"])
        rows.append((row["task_id"], row["description"], row["program"], status, error,
                     row["score"] if status == "ok" else math.nan))  # fmt: skip
    label = f"execution table {table.metadata.get('name', '')}, {len(set(tasks))} tasks"
    return _build(rows, label.replace("  ", " "), {})


def pool_cases(
    path: str | os.PathLike[str] | None = None, tasks: Sequence[str] | None = None
) -> Cases:
    """Every row of a pool table (:mod:`~wmrl_env.envs.ml_tasks.pool`; default: the second
    suite's committed one, its held-out tasks) on ``tasks`` (default: all of the table's),
    scored as the pool suite rewards them: the validation score normalised per task
    (trivial baseline 0, the table's best program on the task 1)."""
    from wmrl_env.bench.pool_suite import default_pool_table
    from wmrl_env.world_models.programs.open_space_data import pool_training_rows

    path = default_pool_table() if path is None else path
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no pool table at {path}")
    found = pool_training_rows(path, tasks, exclude=())  # measured against, never fitted
    rows = []
    for task, context, program, label, score in zip(
        found.task_ids,
        found.descriptions,
        found.programs,
        found.labels,
        found.score,
        strict=True,
    ):
        status, _, error = label.partition(":")
        rows.append((task, context, program, status, error, score))
    return _build(rows, f"pool table {Path(path).name}, {len(set(found.task_ids))} tasks", {})


def log_cases(
    path: str | os.PathLike[str],
    *,
    run_id: str | None = None,
    context_of: Callable[[str], Any] | None = None,
) -> Cases:
    """The executions of an SQLite execution log
    (:class:`~wmrl_env.store.sqlite_log.ExecutionLog`), oldest first, optionally of one run.

    ``context_of(task_id)`` gives what the world model reads for a task (default: the
    suite's task description where the task is one of the suite's, else the task id).
    Rows without a task id and infrastructure failures are left out (``skipped``).
    """
    from wmrl_env.store import ExecutionLog

    if not os.path.isfile(path):
        raise FileNotFoundError(f"no execution log at {path}")
    context_of = context_of or _default_context
    rows, skipped, contexts = [], {"no task_id": 0, "infrastructure failure": 0}, {}
    with ExecutionLog(path) as log:
        for record in log.iter_rows(run_id=run_id):
            if record.task_id is None:
                skipped["no task_id"] += 1
                continue
            if record.status == "error":
                skipped["infrastructure failure"] += 1
                continue
            status, error = observed_status(
                record.status, record.message, record.artifact, record.stderr
            )
            if record.task_id not in contexts:
                contexts[record.task_id] = context_of(record.task_id)
            score = record.score if status == "ok" else math.nan
            rows.append((record.task_id, contexts[record.task_id], record.artifact, status,
                         error, score))  # fmt: skip
    return _build(rows, f"execution log {path}", {k: v for k, v in skipped.items() if v})


def _default_context(task_id: str) -> Any:
    from wmrl_env.envs.ml_tasks import registry

    return suite_context(task_id) if task_id in registry.task_ids("all") else task_id
