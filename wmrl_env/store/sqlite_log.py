"""The durable execution log: one committed SQLite row per real execution.

Every real execution is expensive and is training data for the next world model, so each
result is written in its own transaction the moment it exists. The database runs in WAL mode
with ``synchronous=FULL`` by default: a committed row survives the process being killed
(SIGKILL) and, with FULL, a power cut; the file is never left half-written. One
:class:`ExecutionLog` is safe to share between threads; several processes may write to the
same file (SQLite serialises them; ``busy_timeout`` waits for the lock).

The table and its columns are :mod:`wmrl_env.store.schema`'s (``id, recorded_at, run_id, step,
job_id, task_id, artifact_hash, artifact, status, score, wm_score, wall_seconds,
exec_seconds, message, stdout, stderr, metadata``). NaN scores are stored as NULL and read
back as NaN.

Example:
    >>> import tempfile, os
    >>> from wmrl_env.executors.base import ExecResult
    >>> path = os.path.join(tempfile.mkdtemp(), "log.sqlite")
    >>> with ExecutionLog(path) as log:
    ...     _ = log.record(ExecResult(job_id="j1", status="ok", score=0.5), artifact="print(1)",
    ...                    task_id="iris", run_id="demo", step=3, wm_score=0.4)
    ...     row = log.rows()[0]
    >>> row.task_id, row.status, row.score, row.wm_score, row.step, len(row.artifact_hash)
    ('iris', 'ok', 0.5, 0.4, 3, 64)
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from wmrl_env.executors.base import ExecResult
from wmrl_env.sandboxes.job import Job
from wmrl_env.store.schema import COLUMNS, SCHEMA_VERSION, TABLE, TAG_COLUMNS, create_statements
from wmrl_env.utils.hashing import artifact_hash

__all__ = ["ExecutionLog", "ExecutionRecord"]

TEXT_TAIL_CHARS = 8000  # stdout / stderr kept per row (the executor already caps them)


@dataclass(frozen=True)
class ExecutionRecord:
    """One logged execution (a row of the table, :data:`~wmrl_env.store.schema.COLUMNS`)."""

    id: int
    recorded_at: str
    run_id: str | None
    step: int | None
    job_id: str
    task_id: str | None
    artifact_hash: str
    artifact: str
    status: str
    score: float
    wm_score: float
    wall_seconds: float
    exec_seconds: float
    message: str
    stdout: str
    stderr: str
    metadata: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in COLUMNS}


def _switch_to_wal(conn: sqlite3.Connection, timeout_s: float) -> None:
    """Put the database in WAL mode, waiting up to ``timeout_s`` for other processes.

    When several processes open a new file at once, SQLite answers the switch with "database
    is locked" at once instead of waiting out its busy timeout (it refuses the lock upgrade to
    avoid a deadlock), so the switch is retried here until the timeout.
    """
    deadline = time.monotonic() + timeout_s
    delay = 0.005
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() + delay > deadline:
                raise
            time.sleep(delay)
            delay = min(2 * delay, 0.2)


def _nullable(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else float(value)


class ExecutionLog:
    """Append-only SQLite log of real executions (WAL, one transaction per row, thread-safe).

    Args:
        path: the database file; created with its parent folder when missing.
        synchronous: SQLite's ``synchronous`` level. ``FULL`` (default) survives power
            loss; ``NORMAL`` survives any process crash and is faster on slow disks.
        busy_timeout_s: how long a writer waits for another process's lock.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: Literal["FULL", "NORMAL"] = "FULL",
        busy_timeout_s: float = 30.0,
    ) -> None:
        if synchronous not in ("FULL", "NORMAL"):
            raise ValueError(f"synchronous must be 'FULL' or 'NORMAL', got {synchronous!r}")
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = sqlite3.connect(
            self.path, timeout=busy_timeout_s, check_same_thread=False, isolation_level=None
        )
        _switch_to_wal(self._conn, busy_timeout_s)
        self._conn.execute(f"PRAGMA synchronous={synchronous}")
        with self._transaction() as conn:
            for statement in create_statements():
                conn.execute(statement)
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version not in (0, SCHEMA_VERSION):
                raise RuntimeError(
                    f"{self.path} has schema version {version}; this wmrl-env writes "
                    f"version {SCHEMA_VERSION}"
                )
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    # ------------------------------------------------------------------------------ writing

    def record(
        self,
        result: ExecResult,
        *,
        artifact: str,
        task_id: str | None = None,
        run_id: str | None = None,
        step: int | None = None,
        wm_score: float | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> int:
        """Commit one execution; returns its row id once it is durable."""
        if not isinstance(result, ExecResult):
            raise TypeError(f"result must be an ExecResult, got {type(result).__name__}")
        if not isinstance(artifact, str):
            raise TypeError(f"artifact must be str, got {type(artifact).__name__}")
        row = (
            datetime.now(timezone.utc).isoformat(timespec="microseconds"),
            None if run_id is None else str(run_id),
            None if step is None else int(step),
            result.job_id,
            None if task_id is None else str(task_id),
            artifact_hash(artifact),
            artifact,
            result.status.value,
            _nullable(result.score),
            _nullable(None if wm_score is None else float(wm_score)),
            float(result.wall_seconds),
            float(result.exec_seconds),
            result.message,
            result.stdout[-TEXT_TAIL_CHARS:],
            result.stderr[-TEXT_TAIL_CHARS:],
            json.dumps(dict(metadata or {}), default=str, sort_keys=True),
        )
        placeholders = ", ".join("?" * len(row))
        with self._transaction() as conn:
            cursor = conn.execute(
                f"INSERT INTO {TABLE} ({', '.join(COLUMNS[1:])}) VALUES ({placeholders})", row
            )
            return int(cursor.lastrowid)

    def record_job(self, job: Job, result: ExecResult, *, run_id: str | None = None) -> int:
        """Commit the execution of ``job``, taking task id, run id, step and world-model score
        from its tags (:data:`TAG_COLUMNS`; a tag overrides ``run_id``)."""
        tags = dict(job.tags)
        metadata: dict[str, Any] = {"tags": {k: v for k, v in tags.items() if k not in TAG_COLUMNS}}
        if result.metadata:
            metadata["result"] = dict(result.metadata)
        return self.record(
            result,
            artifact=job.program,
            task_id=tags.get("task_id"),
            run_id=tags.get("run_id", run_id),
            step=tags.get("step"),
            wm_score=tags.get("wm_score"),
            metadata=metadata,
        )

    # ------------------------------------------------------------------------------ reading

    def rows(
        self, *, run_id: str | None = None, task_id: str | None = None
    ) -> list[ExecutionRecord]:
        """Every logged execution (optionally of one run and/or task), oldest first."""
        return list(self.iter_rows(run_id=run_id, task_id=task_id))

    def iter_rows(
        self, *, run_id: str | None = None, task_id: str | None = None
    ) -> Iterator[ExecutionRecord]:
        clauses, params = [], []
        for column, value in (("run_id", run_id), ("task_id", task_id)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        with self._transaction(write=False) as conn:
            fetched = conn.execute(
                f"SELECT {', '.join(COLUMNS)} FROM {TABLE}{where} ORDER BY id", params
            ).fetchall()
        for values in fetched:
            record = dict(zip(COLUMNS, values, strict=True))
            for name in ("score", "wm_score"):
                record[name] = math.nan if record[name] is None else record[name]
            record["metadata"] = json.loads(record["metadata"])
            yield ExecutionRecord(**record)

    def __len__(self) -> int:
        with self._transaction(write=False) as conn:
            return int(conn.execute(f"SELECT COUNT(*) FROM {TABLE}").fetchone()[0])

    def integrity_check(self) -> str:
        """SQLite's ``PRAGMA integrity_check``: ``'ok'`` for a sound database."""
        with self._transaction(write=False) as conn:
            return "; ".join(row[0] for row in conn.execute("PRAGMA integrity_check"))

    # --------------------------------------------------------------------------- lifecycle

    def _transaction(self, *, write: bool = True) -> _Transaction:
        if self._conn is None:
            raise RuntimeError(f"ExecutionLog({self.path}) is closed")
        return _Transaction(self._conn, self._lock, write=write)

    def close(self) -> None:
        """Checkpoint the WAL into the main file and close. Idempotent."""
        with self._lock:
            if self._conn is not None:
                self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                self._conn.close()
                self._conn = None

    def __enter__(self) -> ExecutionLog:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ExecutionLog({str(self.path)!r})"


class _Transaction:
    """Holds the log's lock and wraps the block in BEGIN ... COMMIT / ROLLBACK.

    Writers begin IMMEDIATE (take the database's write lock up front, so a busy database
    waits instead of failing mid-transaction); readers begin DEFERRED (a consistent snapshot).
    """

    def __init__(self, conn: sqlite3.Connection, lock: threading.Lock, *, write: bool) -> None:
        self._conn, self._lock = conn, lock
        self._begin = "BEGIN IMMEDIATE" if write else "BEGIN DEFERRED"

    def __enter__(self) -> sqlite3.Connection:
        self._lock.acquire()
        try:
            self._conn.execute(self._begin)
        except BaseException:
            self._lock.release()
            raise
        return self._conn

    def __exit__(self, exc_type: object, *exc_info: object) -> None:
        try:
            self._conn.execute("ROLLBACK" if exc_type is not None else "COMMIT")
        finally:
            self._lock.release()
