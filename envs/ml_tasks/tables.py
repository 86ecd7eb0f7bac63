"""The committed execution table: structured programs on the suite's tasks, each run once.

``data/table_v1.csv.gz`` has one row per (task, program) with the columns
:data:`TABLE_COLUMNS`: every program on every ``train`` and ``heldout`` task, the seeded
program sample on ``wm`` tasks (:func:`~wmrl_env.envs.ml_tasks.registry.table_programs`).
``data/table_v1.json`` records how it was made (command, machine, executor, time limit,
duration, which splits are complete) and, per task, the metric, trivial baseline and
reference (best raw score seen; the registry's ``data/references.json`` holds the same
numbers for :func:`~wmrl_env.envs.ml_tasks.get_task`). Like NAS-Bench-201, every reward
replayed from it is a real execution result.

Example:
    >>> from wmrl_env.utils.hashing import artifact_hash
    >>> table = load_table()
    >>> row = table.lookup("iris", "standardize-linear-mid")
    >>> row.status, 0.0 <= row.score <= 1.0, row.program_hash == artifact_hash(row.program())
    ('ok', True, True)
"""

from __future__ import annotations

import csv
import functools
import gzip
import io
import json
import math
import os
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wmrl_env.sandboxes.replay import ReplayExecutor, ReplayRecord

from .programs import ProgramSpec, render_program

__all__ = [
    "DATA_DIR",
    "TABLE_COLUMNS",
    "ExecutionTable",
    "TableRow",
    "load_table",
    "summary_markdown",
]

DATA_DIR = Path(__file__).parent / "data"
TABLE_NAME = "table_v1"
TABLE_COLUMNS: tuple[str, ...] = (
    "task_id",
    "program_id",
    "program_hash",
    "status",
    "raw_metric",
    "score",
    "exec_seconds",
    "message",
)


@dataclass(frozen=True)
class TableRow:
    """One real execution of a structured program on a task.

    ``score`` is the normalised score (NaN unless ``status == "ok"``), ``raw_metric`` the
    task metric, ``exec_seconds`` the measured seconds of the live run.
    """

    task_id: str
    program_id: str
    program_hash: str
    status: str
    raw_metric: float
    score: float
    exec_seconds: float
    message: str

    @property
    def spec(self) -> ProgramSpec:
        return ProgramSpec.from_id(self.program_id)

    def program(self) -> str:
        """The exact program text that was executed (its hash is ``program_hash``)."""
        from .registry import get_task

        return render_program(self.spec, get_task(self.task_id).kind)

    def as_csv_row(self) -> dict[str, str]:
        row = {name: getattr(self, name) for name in TABLE_COLUMNS}
        for name in ("raw_metric", "score", "exec_seconds"):
            row[name] = "" if math.isnan(row[name]) else repr(float(row[name]))
        return row

    @classmethod
    def from_csv_row(cls, row: dict[str, str]) -> TableRow:
        numbers = {
            name: float(row[name]) if row[name] else math.nan
            for name in ("raw_metric", "score", "exec_seconds")
        }
        return cls(**{**row, **numbers})


@dataclass(frozen=True)
class ExecutionTable:
    """The rows of an execution table and the metadata of how they were produced."""

    rows: tuple[TableRow, ...]
    metadata: dict[str, Any]

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> ExecutionTable:
        """Read ``<name>.csv.gz`` and its ``<name>.json`` beside it."""
        path = Path(path)
        with gzip.open(path, "rt", newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            if tuple(reader.fieldnames or ()) != TABLE_COLUMNS:
                raise ValueError(f"{path}: columns {reader.fieldnames}, expected {TABLE_COLUMNS}")
            rows = tuple(TableRow.from_csv_row(row) for row in reader)
        meta_path = path.with_name(path.name.removesuffix(".csv.gz") + ".json")
        metadata = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
        return cls(rows=rows, metadata=metadata)

    def write(self, path: str | os.PathLike[str]) -> None:
        """Write the rows (byte-reproducible gzip) and the metadata JSON beside them."""
        path = Path(path)
        with (
            open(path, "wb") as raw,
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as zipped,
        ):
            text = _csv_text(self.rows)
            zipped.write(text.encode("utf-8"))
        meta_path = path.with_name(path.name.removesuffix(".csv.gz") + ".json")
        meta_path.write_text(json.dumps(self.metadata, indent=2, sort_keys=True) + "\n")

    @functools.cached_property
    def _index(self) -> dict[tuple[str, str], TableRow]:
        return {(row.task_id, row.program_id): row for row in self.rows}

    @property
    def task_ids(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(row.task_id for row in self.rows))

    def lookup(self, task_id: str, program: ProgramSpec | str) -> TableRow:
        program_id = program.id if isinstance(program, ProgramSpec) else program
        try:
            return self._index[(task_id, program_id)]
        except KeyError:
            raise KeyError(f"the table has no row for task {task_id!r}, {program_id!r}") from None

    def for_task(self, task_id: str) -> list[TableRow]:
        return [row for row in self.rows if row.task_id == task_id]

    def with_text(self) -> list[dict[str, Any]]:
        """Every row as a dict plus ``description`` and ``program``: what a world model reads
        (and, in ``score`` / ``status``, what it learns to predict)."""
        from .registry import get_task

        return [
            {
                **{name: getattr(row, name) for name in TABLE_COLUMNS},
                "description": get_task(row.task_id).description,
                "program": row.program(),
            }
            for row in self.rows
        ]

    def replay_executor(self) -> ReplayExecutor:
        """A :class:`ReplayExecutor` answering every (task, program) of this table."""
        return ReplayExecutor(
            ReplayRecord(
                task_id=row.task_id,
                program_hash=row.program_hash,
                status=row.status,
                score=row.score,
                exec_seconds=row.exec_seconds,
                message=row.message,
                metadata={"raw_metric": row.raw_metric, "program_id": row.program_id},
            )
            for row in self.rows
        )

    def summary(self) -> list[dict[str, Any]]:
        """Per task: status counts, best program, median and quartile normalised scores,
        median live execution seconds (what ``docs/tasks.md`` reports)."""
        out = []
        for task_id in self.task_ids:
            rows = self.for_task(task_id)
            ok = [row for row in rows if row.status == "ok"]
            best = max(ok, key=lambda row: row.score) if ok else None
            scores = sorted(row.score for row in ok)
            out.append(
                {
                    "task_id": task_id,
                    "programs": len(rows),
                    "ok": len(ok),
                    "failed": {
                        status: sum(row.status == status for row in rows)
                        for status in sorted({row.status for row in rows} - {"ok"})
                    },
                    "best_program": best.program_id if best else None,
                    "median_score": statistics.median(scores) if scores else math.nan,
                    "median_exec_seconds": statistics.median(row.exec_seconds for row in rows),
                }
            )
        return out


def summary_markdown(table: ExecutionTable) -> str:
    """The per-task figures of ``docs/tasks.md`` as a Markdown table."""
    from .registry import get_task, manifest_entry

    lines = [
        "| task | split | kind | metric | train/test rows | features | trivial baseline "
        "| best (program) | median | ok / failed | median exec s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for entry in table.summary():
        task_id = entry["task_id"]
        task, facts = get_task(task_id), table.metadata["tasks"][task_id]
        failed = ", ".join(f"{n} {status}" for status, n in entry["failed"].items()) or "0"
        lines.append(
            f"| {task_id} | {manifest_entry(task_id)['split']} "
            f"| {task.kind} | {task.metric} | {len(task.y_train)}/{len(task.test_ids)} "
            f"| {task.X_train.shape[1]} | {facts['baseline']:.4g} "
            f"| {facts['reference']:.4g} ({entry['best_program']}) "
            f"| {entry['median_score']:.2f} | {entry['ok']} / {failed} "
            f"| {entry['median_exec_seconds']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def _csv_text(rows: Iterable[TableRow]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=TABLE_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(row.as_csv_row())
    return buffer.getvalue()


def table_path() -> Path:
    return DATA_DIR / f"{TABLE_NAME}.csv.gz"


@functools.lru_cache(maxsize=1)
def _committed_table() -> ExecutionTable:
    path = table_path()
    if not path.is_file():
        raise FileNotFoundError(
            f"the execution table {path} is missing: build it with 'wmrl build-tables'"
        )
    return ExecutionTable.read(path)


def load_table(path: str | os.PathLike[str] | None = None) -> ExecutionTable:
    """The committed table (cached), or the table at ``path``."""
    return _committed_table() if path is None else ExecutionTable.read(path)
