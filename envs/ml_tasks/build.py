"""Build the exhaustive execution table: run every structured program on every task, live.

Every execution goes through a :class:`~wmrl_env.store.LoggingExecutor` into an SQLite
execution log first, so an interrupted build loses nothing and resumes where it stopped
(executions already in the log for this table's run id are not repeated). When all are
done, the raw scores are normalised per task (reference = best raw score seen) and the table
is written as ``<name>.csv.gz`` + ``<name>.json``.

Example (a real build runs the programs in the sandbox; see ``wmrl build-tables --help``)::

    from wmrl_env.executors import LocalSandbox
    build_table(executor=LocalSandbox(max_workers=2), log_path="runs/table_v0.sqlite",
                out_path="envs/ml_tasks/data/table_v0.csv.gz", command="wmrl build-tables")
"""

from __future__ import annotations

import importlib.metadata
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import as_completed
from datetime import datetime, timezone
from typing import Any

from wmrl_env.executors.base import ExecStatus, Executor, Job
from wmrl_env.store import ExecutionLog, ExecutionRecord, LoggingExecutor
from wmrl_env.utils.hashing import artifact_hash

from .programs import ProgramSpec, all_programs, render_program
from .registry import ALL_TASKS, get_task
from .scoring import METRICS, normalised_score
from .tables import TABLE_NAME, ExecutionTable, TableRow

__all__ = ["build_table", "table_from_log"]

RUN_ID = f"build-{TABLE_NAME}"


def _pending_jobs(
    log: ExecutionLog,
    task_ids: Sequence[str],
    programs: Sequence[ProgramSpec],
    timeout_s: float | None,
    data_root: str | None,
    retry: Collection[str] = (),
) -> list[Job]:
    """Jobs with no logged result yet, or whose latest result has a status in ``retry``.

    ``error`` rows never count as results: the executor failed, not the program.
    """
    latest = {
        (row.task_id, row.artifact_hash): row.status
        for row in log.iter_rows(run_id=RUN_ID)
        if row.status != ExecStatus.ERROR.value
    }
    jobs = []
    for task_id in task_ids:
        task = get_task(task_id)
        for spec in programs:
            program = render_program(spec, task.kind)
            status = latest.get((task_id, artifact_hash(program)))
            if status is not None and status not in retry:
                continue
            jobs.append(
                task.make_job(
                    program,
                    data_root=data_root,
                    timeout_s=timeout_s,
                    normalise=False,  # the log keeps raw metrics; normalised at the end
                    tags={"run_id": RUN_ID, "program_id": spec.id},
                )
            )
    return jobs


def table_from_log(
    log: ExecutionLog,
    task_ids: Sequence[str],
    programs: Sequence[ProgramSpec],
    metadata: dict[str, Any],
) -> ExecutionTable:
    """Assemble the table from the build's logged executions (latest row per program;
    ``error`` rows, where the executor itself failed, never enter a table)."""
    latest: dict[tuple[str, str], ExecutionRecord] = {}
    for record in log.iter_rows(run_id=RUN_ID):
        if record.status != ExecStatus.ERROR.value:
            latest[(str(record.task_id), record.artifact_hash)] = record
    rows, facts = [], {}
    for task_id in task_ids:
        task = get_task(task_id)
        records = []
        for spec in programs:
            key = (task_id, artifact_hash(render_program(spec, task.kind)))
            if key not in latest:
                raise ValueError(f"the log has no execution of {spec.id} on {task_id}")
            records.append((spec, latest[key]))
        metric = METRICS[task.metric]
        ok_raw = [r.score for _, r in records if r.status == "ok"]
        best = (max if metric.higher_is_better else min)(ok_raw) if ok_raw else metric.ideal
        for spec, record in records:
            raw = record.score if record.status == "ok" else math.nan
            rows.append(
                TableRow(
                    task_id=task_id,
                    program_id=spec.id,
                    program_hash=record.artifact_hash,
                    status=record.status,
                    raw_metric=raw,
                    score=normalised_score(raw, baseline=task.baseline, reference=best),
                    exec_seconds=round(record.exec_seconds, 4),
                    message=record.message.strip().splitlines()[-1][:300] if record.message else "",
                )
            )
        facts[task_id] = {
            "kind": task.kind,
            "metric": task.metric,
            "higher_is_better": metric.higher_is_better,
            "baseline": task.baseline,
            "reference": best,
            "ok": len(ok_raw),
            "median_exec_seconds": statistics.median(r.exec_seconds for _, r in records),
        }
    return ExecutionTable(rows=tuple(rows), metadata={**metadata, "tasks": facts})


def build_table(
    *,
    executor: Executor[Job],
    log_path: str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    command: str,
    task_ids: Sequence[str] = ALL_TASKS,
    programs: Sequence[ProgramSpec] | None = None,
    timeout_s: float | None = None,
    data_root: str | None = None,
    retry: Collection[str] = (),
    progress: Callable[[str], None] = print,
) -> ExecutionTable:
    """Execute every (task, program) pair not yet in the log, then write the table.

    Args:
        executor: runs the programs (the local sandbox for the committed table); closed here.
        log_path: the SQLite execution log (resumable).
        out_path: where ``<name>.csv.gz`` goes; ``<name>.json`` is written beside it.
        command: the command line that made the table, recorded in its metadata.
        timeout_s: per-program limit (default: each task's own).
        retry: run a program again when its latest logged status is one of these (e.g.
            ``("timeout",)`` after the machine stalled); the table keeps the latest run, the
            log keeps every run.
    """
    programs = list(programs) if programs is not None else all_programs()
    started = time.perf_counter()
    with ExecutionLog(log_path) as log:
        jobs = _pending_jobs(log, task_ids, programs, timeout_s, data_root, retry)
        total = len(task_ids) * len(programs)
        progress(f"{total - len(jobs)}/{total} results kept from the log; running {len(jobs)}")
        with LoggingExecutor(executor, log, run_id=RUN_ID) as logging_executor:
            futures = logging_executor.submit(jobs)
            for done, future in enumerate(as_completed(futures), start=1):
                result = future.result()
                if done % 20 == 0 or done == len(jobs):
                    elapsed = time.perf_counter() - started
                    progress(
                        f"{done}/{len(jobs)} done in {elapsed:.0f} s "
                        f"(last: {result.status.value}, {result.exec_seconds:.1f} s)"
                    )
        table = table_from_log(log, task_ids, programs, _provenance(command, executor, log))
    table.write(out_path)
    progress(f"wrote {out_path} ({len(table.rows)} rows) in {time.perf_counter() - started:.0f} s")
    return table


def _provenance(command: str, executor: Executor[Job], log: ExecutionLog) -> dict[str, Any]:
    records = log.rows(run_id=RUN_ID)
    first, last = records[0].recorded_at, records[-1].recorded_at
    span = datetime.fromisoformat(last) - datetime.fromisoformat(first)
    return {
        "name": TABLE_NAME,
        "command": command,
        "executor": type(executor).__name__,
        "machine": {
            "platform": platform.platform(),
            "python": sys.version.split()[0],
            "cpu_count": os.cpu_count(),
            "numpy": importlib.metadata.version("numpy"),
            "scikit-learn": importlib.metadata.version("scikit-learn"),
        },
        "first_execution_at": first,
        "last_execution_at": last,
        "wall_seconds_first_to_last": round(span.total_seconds(), 1),
        "sum_exec_seconds": round(sum(r.exec_seconds for r in records), 1),
        "written_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
