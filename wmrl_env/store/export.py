"""Export an execution log to CSV or parquet (for world-model training and analysis).

Example:
    >>> import tempfile, os
    >>> from wmrl_env.executors.base import ExecResult
    >>> folder = tempfile.mkdtemp()
    >>> with ExecutionLog(os.path.join(folder, "log.sqlite")) as log:
    ...     _ = log.record(ExecResult(job_id="j", status="crashed", message="boom"), artifact="1/0")
    ...     n = export_csv(log, os.path.join(folder, "log.csv"))
    >>> n, open(os.path.join(folder, "log.csv")).readline().split(",")[:3]
    (1, ['id', 'recorded_at', 'run_id'])
"""

from __future__ import annotations

import csv
import json
import math
import os
from pathlib import Path
from typing import Any

from wmrl_env.utils.imports import require

from .schema import COLUMNS
from .sqlite_log import ExecutionLog

__all__ = ["export_csv", "export_log", "export_parquet"]


def _flat_rows(log: ExecutionLog, run_id: str | None) -> list[dict[str, Any]]:
    rows = []
    for record in log.iter_rows(run_id=run_id):
        row = record.as_dict()
        row["metadata"] = json.dumps(row["metadata"], sort_keys=True, default=str)
        rows.append(
            {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()}
        )
    return rows


def export_csv(
    log: ExecutionLog, path: str | os.PathLike[str], *, run_id: str | None = None
) -> int:
    """Write the log (or one run of it) to CSV; missing scores are empty cells. Returns rows."""
    rows = _flat_rows(log, run_id)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return len(rows)


def export_parquet(
    log: ExecutionLog, path: str | os.PathLike[str], *, run_id: str | None = None
) -> int:
    """Write the log (or one run of it) to parquet, missing scores as nulls (needs pyarrow:
    the ``tasks`` extra)."""
    pa = require("pyarrow", "parquet export")
    parquet = require("pyarrow.parquet", "parquet export")
    rows = _flat_rows(log, run_id)
    table = (
        pa.Table.from_pylist(rows, schema=_arrow_schema(pa))
        if rows
        else _arrow_schema(pa).empty_table()
    )
    parquet.write_table(table, path)
    return len(rows)


def _arrow_schema(pa: Any) -> Any:
    types = {"id": pa.int64(), "step": pa.int64()}
    for name in ("score", "wm_score", "wall_seconds", "exec_seconds"):
        types[name] = pa.float64()
    return pa.schema([(name, types.get(name, pa.string())) for name in COLUMNS])


def export_log(
    source: str | os.PathLike[str],
    destination: str | os.PathLike[str],
    *,
    run_id: str | None = None,
) -> int:
    """Export the log file ``source`` to ``destination``; the suffix (``.csv`` or
    ``.parquet``) chooses the format. Returns the number of rows written."""
    suffix = Path(destination).suffix.lower()
    writers = {".csv": export_csv, ".parquet": export_parquet}
    if suffix not in writers:
        raise ValueError(f"destination must end in .csv or .parquet, got {str(destination)!r}")
    if not Path(source).is_file():
        raise FileNotFoundError(f"no execution log at {str(source)!r}")
    with ExecutionLog(source) as log:
        return writers[suffix](log, destination, run_id=run_id)
