"""Read (context, artifact, score) training pairs from an execution log (CSV or SQLite).

Two layouts are understood:

* a table with a ``context`` column (any CSV or SQLite table you export), or
* wmrl-env's execution log (:mod:`wmrl_env.store.schema`) or its CSV export, where the
  context of a row is looked up from its ``task_id`` in a ``contexts`` mapping (the task
  descriptions), or is the ``task_id`` itself when no mapping is given.

Rows that are not scored (:func:`~wmrl_env.store.schema.is_scored`: status not ``ok``, or an
empty/NaN score) are failed executions: they are skipped and counted in
:attr:`TrainingPairs.n_skipped`.

Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "log.csv")
    >>> rows = "task_id,artifact,status,score\\nt1,x=1,ok,0.5\\nt1,x=,crashed,\\n"
    >>> _ = open(path, "w").write(rows)
    >>> pairs = read_training_pairs(path, contexts={"t1": "Set x to one."})
    >>> pairs.contexts, pairs.artifacts, pairs.scores.tolist(), pairs.n_skipped
    (['Set x to one.'], ['x=1'], [0.5], 1)
"""

from __future__ import annotations

import csv
import math
import os
import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from wmrl_env.store.schema import TABLE, is_scored

__all__ = ["TrainingPairs", "read_training_pairs"]

_SQLITE_SUFFIXES = (".sqlite", ".sqlite3", ".db")


@dataclass(frozen=True)
class TrainingPairs:
    """Scored pairs read from a log; ``groups`` is the task id (or context) of each pair."""

    contexts: list[str]
    artifacts: list[str]
    scores: np.ndarray
    groups: list[str]
    n_skipped: int

    def __len__(self) -> int:
        return len(self.artifacts)


def _csv_rows(path: Path) -> Iterable[dict[str, Any]]:
    with open(path, newline="", encoding="utf-8") as handle:
        yield from csv.DictReader(handle)


def _sqlite_rows(path: Path, table: str) -> Iterable[dict[str, Any]]:
    if not table.isidentifier():
        raise ValueError(f"table name must be a plain identifier, got {table!r}")
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        connection.row_factory = sqlite3.Row
        names = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
        if table not in names:
            raise ValueError(f"{path} has no table {table!r} (tables: {sorted(names)})")
        for row in connection.execute(f"SELECT * FROM {table}"):
            yield dict(row)
    finally:
        connection.close()


def _score(value: Any) -> float:
    if value is None or value == "":
        return math.nan
    try:
        return float(value)
    except ValueError as exc:
        raise ValueError(f"score {value!r} is not a number") from exc


def read_training_pairs(
    path: str | os.PathLike[str],
    *,
    contexts: Mapping[str, str] | None = None,
    table: str = TABLE,
) -> TrainingPairs:
    """Read scored pairs from a CSV file or a SQLite database (by suffix).

    Args:
        path: ``.csv``, or ``.sqlite``/``.sqlite3``/``.db``.
        contexts: task id -> context text, for logs that store ``task_id`` but no ``context``.
        table: the SQLite table to read.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"execution log {path} does not exist")
    rows = _sqlite_rows(path, table) if path.suffix in _SQLITE_SUFFIXES else _csv_rows(path)
    out_contexts, artifacts, scores, groups = [], [], [], []
    skipped = 0
    for number, row in enumerate(rows, start=1):
        if "artifact" not in row or "score" not in row:
            raise ValueError(f"{path} needs 'artifact' and 'score' columns; found {sorted(row)}")
        score = _score(row["score"])
        if not is_scored(row.get("status") or "ok", score):
            skipped += 1
            continue
        if row.get("context") not in (None, ""):
            context, group = str(row["context"]), str(row.get("task_id") or row["context"])
        elif row.get("task_id") not in (None, ""):
            group = str(row["task_id"])
            if contexts is not None and group not in contexts:
                raise ValueError(f"row {number}: no context given for task_id {group!r}")
            context = contexts[group] if contexts is not None else group
        else:
            raise ValueError(f"row {number} of {path} has neither a context nor a task_id")
        out_contexts.append(context)
        artifacts.append(str(row["artifact"]))
        scores.append(score)
        groups.append(group)
    return TrainingPairs(
        out_contexts, artifacts, np.asarray(scores, dtype=np.float64), groups, skipped
    )
