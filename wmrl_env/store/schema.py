"""The execution log's schema, in one place: its table, columns, indexes and scored rows.

:class:`~wmrl_env.store.sqlite_log.ExecutionLog` creates and writes it;
:mod:`~wmrl_env.store.export` and
:func:`~wmrl_env.world_models.training_data.read_training_pairs` read it. NaN scores are
stored as NULL. A row is training data (*scored*) when its status is ``ok`` and its score a
number.

Example:
    >>> TABLE, COLUMNS[:3]
    ('executions', ('id', 'recorded_at', 'run_id'))
    >>> is_scored("ok", 0.5), is_scored("crashed", 0.5), is_scored("ok", float("nan"))
    (True, False, False)
"""

from __future__ import annotations

import math

from wmrl_env.executors.base import ExecStatus

__all__ = [
    "COLUMNS",
    "COLUMN_TYPES",
    "SCHEMA_VERSION",
    "TABLE",
    "TAG_COLUMNS",
    "create_statements",
    "is_scored",
]

TABLE = "executions"
SCHEMA_VERSION = 1

COLUMN_TYPES: dict[str, str] = {
    "id": "INTEGER PRIMARY KEY AUTOINCREMENT",
    "recorded_at": "TEXT NOT NULL",
    "run_id": "TEXT",
    "step": "INTEGER",
    "job_id": "TEXT NOT NULL",
    "task_id": "TEXT",
    "artifact_hash": "TEXT NOT NULL",
    "artifact": "TEXT NOT NULL",
    "status": "TEXT NOT NULL",
    "score": "REAL",
    "wm_score": "REAL",
    "wall_seconds": "REAL NOT NULL",
    "exec_seconds": "REAL NOT NULL",
    "message": "TEXT NOT NULL",
    "stdout": "TEXT NOT NULL",
    "stderr": "TEXT NOT NULL",
    "metadata": "TEXT NOT NULL",  # JSON
}
COLUMNS: tuple[str, ...] = tuple(COLUMN_TYPES)

TAG_COLUMNS: tuple[str, ...] = ("task_id", "run_id", "step", "wm_score")
"""Job tags that :meth:`ExecutionLog.record_job` stores in their own columns; the other tags
go to ``metadata["tags"]``."""

_INDEXES: dict[str, tuple[str, ...]] = {
    f"{TABLE}_task_artifact": ("task_id", "artifact_hash"),
    f"{TABLE}_run_step": ("run_id", "step"),
}


def create_statements() -> list[str]:
    """The SQL that creates the table and its indexes (a no-op where they exist)."""
    columns = ",\n    ".join(f"{name} {kind}" for name, kind in COLUMN_TYPES.items())
    statements = [f"CREATE TABLE IF NOT EXISTS {TABLE} (\n    {columns}\n)"]
    for name, on in _INDEXES.items():
        statements.append(f"CREATE INDEX IF NOT EXISTS {name} ON {TABLE} ({', '.join(on)})")
    return statements


def is_scored(status: str, score: float) -> bool:
    """A row with a real score to learn from: status ``ok`` and a score that is a number."""
    return status == ExecStatus.OK.value and not math.isnan(score)
