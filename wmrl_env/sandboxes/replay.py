"""Answer jobs from a table of recorded real executions (NAS-Bench style tabular replay).

A :class:`ReplayExecutor` holds one :class:`ReplayRecord` per (task id, program hash): the
status, score and execution seconds of a real run. It identifies a job by its ``task_id``
tag and the SHA-256 of its program text (a ``program_hash`` tag, when present, must match),
returns the recorded status and score, and charges the recorded seconds as
``exec_seconds`` (``wall_seconds`` is the lookup time, about 0). A job the table does not
hold is an ``error`` result that says so, never an invented score.

Example:
    >>> from wmrl_env.sandboxes.job import Job
    >>> from wmrl_env.utils.hashing import artifact_hash
    >>> table = [ReplayRecord("iris", artifact_hash("fit()"), "ok", 0.93, 1.7)]
    >>> with ReplayExecutor(table) as executor:
    ...     hit, miss = executor.run([Job("fit()", tags={"task_id": "iris"}),
    ...                               Job("other()", tags={"task_id": "iris"})])
    >>> hit.status.value, hit.score, hit.exec_seconds
    ('ok', 0.93, 1.7)
    >>> miss.status.value, miss.message.split(":")[0]
    ('error', 'not in the replay table')
"""

from __future__ import annotations

import csv
import gzip
import math
import os
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from wmrl_env.executors.base import BaseExecutor, ExecResult, ExecStatus
from wmrl_env.sandboxes.job import Job
from wmrl_env.utils.hashing import artifact_hash

__all__ = ["ReplayExecutor", "ReplayRecord"]


@dataclass(frozen=True)
class ReplayRecord:
    """One recorded real execution: what happened when a program ran on a task."""

    task_id: str
    program_hash: str
    status: ExecStatus | str
    score: float
    exec_seconds: float
    message: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", ExecStatus(self.status))
        object.__setattr__(self, "score", float(self.score))
        if not self.exec_seconds >= 0:
            raise ValueError(f"exec_seconds must be >= 0, got {self.exec_seconds}")
        if self.status is ExecStatus.OK and math.isnan(self.score):
            raise ValueError(f"record {self.task_id}/{self.program_hash[:12]} is ok without score")


class ReplayExecutor(BaseExecutor[Job]):
    """Executor that replays recorded executions instead of running programs.

    Args:
        records: one record per (task id, program hash); duplicates are an error.
    """

    def __init__(self, records: Iterable[ReplayRecord]) -> None:
        self._records: dict[tuple[str, str], ReplayRecord] = {}
        self._programs_per_task: dict[str, int] = {}
        for record in records:
            key = (record.task_id, record.program_hash)
            if key in self._records:
                raise ValueError(f"two records for task {key[0]!r}, program hash {key[1]}")
            self._records[key] = record
            self._programs_per_task[record.task_id] = (
                self._programs_per_task.get(record.task_id, 0) + 1
            )

    @classmethod
    def from_csv(cls, path: str | os.PathLike[str]) -> ReplayExecutor:
        """Load records from a CSV (``.csv`` or ``.csv.gz``) with the columns ``task_id,
        program_hash, status, score, exec_seconds`` and optionally ``message``; every other
        column goes to the record's metadata (as text)."""
        opener = gzip.open if str(path).endswith(".gz") else open
        with opener(path, "rt", newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            required = {"task_id", "program_hash", "status", "score", "exec_seconds"}
            missing = required - set(reader.fieldnames or ())
            if missing:
                raise ValueError(f"{path}: replay table lacks columns {sorted(missing)}")
            return cls(_record_from_row(row) for row in reader)

    def __len__(self) -> int:
        return len(self._records)

    def lookup(self, job: Job) -> ReplayRecord | str:
        """The record answering ``job``, or the reason there is none."""
        task_id = job.tags.get("task_id")
        if task_id is None:
            return "the job has no 'task_id' tag, so the replay table cannot identify it"
        program_hash = artifact_hash(job.program)
        tagged = job.tags.get("program_hash")
        if tagged is not None and tagged != program_hash:
            return f"its program_hash tag {tagged} does not match its program text"
        record = self._records.get((str(task_id), program_hash))
        if record is None:
            known = self._programs_per_task.get(str(task_id), 0)
            return (
                f"not in the replay table: task {task_id!r}, program hash {program_hash[:16]} "
                f"(the table holds {known} programs for this task)"
            )
        return record

    def _submit(self, jobs: list[Job]) -> list[Future[ExecResult]]:
        futures: list[Future[ExecResult]] = []
        for job in jobs:
            if not isinstance(job, Job):
                raise TypeError(f"ReplayExecutor runs Job objects, got {type(job).__name__}")
            start = time.perf_counter()
            found = self.lookup(job)
            future: Future[ExecResult] = Future()
            future.set_result(_result(job, found, time.perf_counter() - start))
            futures.append(future)
        return futures

    def _close(self) -> None:
        self._records.clear()


def _result(job: Job, found: ReplayRecord | str, wall_seconds: float) -> ExecResult:
    if isinstance(found, str):
        return ExecResult(
            job_id=job.job_id,
            status=ExecStatus.ERROR,
            wall_seconds=wall_seconds,
            message=found,
            metadata={"replay": True, "replay_hit": False},
        )
    return ExecResult(
        job_id=job.job_id,
        status=found.status,
        score=found.score if found.status is ExecStatus.OK else math.nan,
        wall_seconds=wall_seconds,
        exec_seconds=found.exec_seconds,
        message=found.message,
        metadata={"replay": True, "replay_hit": True, **found.metadata},
    )


def _record_from_row(row: dict[str, str]) -> ReplayRecord:
    known = {"task_id", "program_hash", "status", "score", "exec_seconds", "message"}
    return ReplayRecord(
        task_id=row["task_id"],
        program_hash=row["program_hash"],
        status=row["status"],
        score=float(row["score"]) if row["score"] else math.nan,
        exec_seconds=float(row["exec_seconds"]),
        message=row.get("message", ""),
        metadata={k: v for k, v in row.items() if k not in known},
    )
