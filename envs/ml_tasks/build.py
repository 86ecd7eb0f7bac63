"""Build the execution table: run the table's programs on the suite's tasks, live.

Every execution goes through a :class:`~wmrl_env.store.LoggingExecutor` into an SQLite
execution log first, so an interrupted build loses nothing and resumes where it stopped
(executions already in the log for this table's run id are not repeated). When the asked
tasks are done, the raw scores are normalised per task (reference = best raw score seen) and
the table is written as ``<name>.csv.gz`` + ``<name>.json``, holding every task of the suite
whose programs are all in the log: builds of one split after another accumulate.

Each task must be learnable: its best program beats the trivial baseline by
:data:`MIN_LEARNABLE_GAIN` (:func:`learnable_gain`). With ``update_registry=True``
(the committed table) a task that fails is dropped from the manifest, its reason recorded,
and the reference scores go to the registry's ``data/references.json``.

Example (a real build runs the programs in the sandbox; see ``wmrl build-tables --help``)::

    from wmrl_env.envs.ml_tasks.sandbox import default_sandbox
    build_table(executor=default_sandbox(max_workers=2), log_path="runs/table_v1.sqlite",
                out_path="envs/ml_tasks/data/table_v1.csv.gz", command="wmrl build-tables",
                task_ids=task_ids("heldout"), update_registry=True)
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

from wmrl_env.executors.base import ExecStatus, Executor
from wmrl_env.sandboxes.job import Job
from wmrl_env.store import ExecutionLog, ExecutionRecord, LoggingExecutor
from wmrl_env.utils.hashing import artifact_hash

from .programs import ProgramSpec, render_program
from .registry import SPLITS, drop_tasks, get_task, table_programs, task_ids
from .registry import write_reference_scores as _write_references
from .scoring import METRICS, normalised_score
from .tables import TABLE_NAME, ExecutionTable, TableRow
from .tasks import DEFAULT_TIMEOUT_S

__all__ = ["MIN_LEARNABLE_GAIN", "build_table", "learnable_gain", "table_from_log", "unlearnable"]

RUN_ID = f"build-{TABLE_NAME}"
MIN_LEARNABLE_GAIN = 0.1
ProgramsOf = Callable[[str], Sequence[ProgramSpec]]


def _pending_jobs(
    log: ExecutionLog,
    task_ids: Sequence[str],
    programs: ProgramsOf,
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
        for spec in programs(task_id):
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


def _latest_records(log: ExecutionLog) -> dict[tuple[str, str], ExecutionRecord]:
    """The latest non-``error`` record per (task, program hash) of the build's run."""
    latest: dict[tuple[str, str], ExecutionRecord] = {}
    for record in log.iter_rows(run_id=RUN_ID):
        if record.status != ExecStatus.ERROR.value:
            latest[(str(record.task_id), record.artifact_hash)] = record
    return latest


def _task_records(
    latest: dict[tuple[str, str], ExecutionRecord], task_id: str, programs: ProgramsOf
) -> list[tuple[ProgramSpec, ExecutionRecord]] | None:
    """The task's (program, record) pairs, or None when a program has no record yet."""
    kind = get_task(task_id).kind
    pairs = []
    for spec in programs(task_id):
        record = latest.get((task_id, artifact_hash(render_program(spec, kind))))
        if record is None:
            return None
        pairs.append((spec, record))
    return pairs


def table_from_log(
    log: ExecutionLog,
    task_ids: Sequence[str],
    programs: ProgramsOf,
    metadata: dict[str, Any],
    *,
    also: Sequence[str] = (),
) -> ExecutionTable:
    """Assemble the table from the build's logged executions (latest row per program;
    ``error`` rows, where the executor itself failed, never enter a table).

    Every task of ``task_ids`` must be complete in the log; tasks of ``also`` enter the
    table when they are complete (what earlier builds of other splits left in the log).
    """
    latest = _latest_records(log)
    rows, facts = [], {}
    for task_id in dict.fromkeys([*task_ids, *also]):
        records = _task_records(latest, task_id, programs)
        if records is None:
            if task_id not in task_ids:
                continue
            missing = next(
                spec.id
                for spec in programs(task_id)
                if (task_id, artifact_hash(render_program(spec, get_task(task_id).kind)))
                not in latest
            )
            raise ValueError(f"the log has no execution of {missing} on {task_id}")
        task = get_task(task_id)
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
    task_ids: Sequence[str] | None = None,
    programs: Sequence[ProgramSpec] | None = None,
    timeout_s: float | None = None,
    data_root: str | None = None,
    retry: Collection[str] = (),
    update_registry: bool = False,
    progress: Callable[[str], None] = print,
) -> ExecutionTable:
    """Execute every (task, program) pair not yet in the log, then write the table.

    Args:
        executor: runs the programs (the local sandbox for the committed table); closed here.
        log_path: the SQLite execution log (resumable).
        out_path: where ``<name>.csv.gz`` goes; ``<name>.json`` is written beside it.
        command: the command line that made the table, recorded in its metadata.
        task_ids: the tasks to run (default: every task of the suite, split by split).
        programs: the programs to run on every task (default: the table's programs of each
            task, :func:`~wmrl_env.envs.ml_tasks.registry.table_programs`).
        timeout_s: per-program limit (default: each task's own).
        retry: run a program again when its latest logged status is one of these (e.g.
            ``("timeout",)`` after the machine stalled); the table keeps the latest run, the
            log keeps every run.
        update_registry: write the reference scores to the registry and drop unlearnable
            tasks from the manifest (the committed table's build).
    """
    asked = tuple(task_ids) if task_ids is not None else _all_tasks()
    programs_of: ProgramsOf = (lambda _: programs) if programs is not None else table_programs
    started = time.perf_counter()
    with ExecutionLog(log_path) as log:
        jobs = _pending_jobs(log, asked, programs_of, timeout_s, data_root, retry)
        total = sum(len(programs_of(t)) for t in asked)
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
        metadata = _provenance(command, executor, log, timeout_s)
        also = _all_tasks() if programs is None else ()
        table = table_from_log(log, asked, programs_of, metadata, also=also)
    failing = unlearnable(table)
    if failing:
        progress(f"not learnable, left out of the table: {failing}")
        table = _without(table, failing)
    table = ExecutionTable(
        rows=table.rows, metadata={**table.metadata, **_coverage(table, set(failing))}
    )
    if update_registry:
        drop_tasks(failing)
        _write_references({t: f["reference"] for t, f in table.metadata["tasks"].items()})
    table.write(out_path)
    progress(f"wrote {out_path} ({len(table.rows)} rows) in {time.perf_counter() - started:.0f} s")
    return table


def learnable_gain(metric: str, baseline: float, best: float) -> float:
    """How much of the way from the trivial baseline to a perfect score the best program
    goes: ``(best - b) / (ideal - b)`` for accuracy, ROC-AUC and R^2; for RMSE, whose ideal 0
    no noisy target reaches, the share of the baseline's squared error removed
    (``1 - (best / b)^2``, the R^2 of the best program against the training mean).

    >>> learnable_gain("roc_auc", 0.5, 0.8), learnable_gain("rmse", 10.0, 8.0)
    (0.6000000000000001, 0.36)
    """
    if metric == "rmse":
        return 1.0 - (best / baseline) ** 2 if baseline > 0 else 0.0
    span = METRICS[metric].ideal - baseline
    return (best - baseline) / span if span else 0.0


def unlearnable(table: ExecutionTable) -> dict[str, str]:
    """Task id -> reason, for each task whose best program's :func:`learnable_gain` is below
    :data:`MIN_LEARNABLE_GAIN`."""
    failing = {}
    for task_id, facts in table.metadata["tasks"].items():
        gain = learnable_gain(facts["metric"], facts["baseline"], facts["reference"])
        if not gain >= MIN_LEARNABLE_GAIN:
            failing[task_id] = (
                f"not learnable: the best program ({facts['metric']} {facts['reference']:.4g}, "
                f"trivial baseline {facts['baseline']:.4g}) gains {gain:.1%}; "
                f"{MIN_LEARNABLE_GAIN:.0%} required"
            )
    return failing


def _without(table: ExecutionTable, task_ids: Collection[str]) -> ExecutionTable:
    tasks = {t: f for t, f in table.metadata["tasks"].items() if t not in task_ids}
    return ExecutionTable(
        rows=tuple(row for row in table.rows if row.task_id not in task_ids),
        metadata={**table.metadata, "tasks": tasks},
    )


def _all_tasks() -> tuple[str, ...]:
    """Every task of the suite in build order: held-out first, then train, then wm."""
    return task_ids("heldout") + task_ids("train") + task_ids("wm")


def _coverage(table: ExecutionTable, dropped: set[str]) -> dict[str, Any]:
    """Which splits the table covers completely (a build can stop between splits); tasks
    being dropped as unlearnable do not count."""
    present = set(table.metadata["tasks"])
    counts = {split: len(set(task_ids(split)) - dropped) for split in SPLITS}  # type: ignore[arg-type]
    covered = {split: len(present & set(task_ids(split))) for split in SPLITS}  # type: ignore[arg-type]
    return {
        "tasks_per_split": covered,
        "complete_splits": sorted(s for s in SPLITS if counts[s] and covered[s] == counts[s]),
    }


def _provenance(
    command: str, executor: Executor[Job], log: ExecutionLog, timeout_s: float | None
) -> dict[str, Any]:
    records = log.rows(run_id=RUN_ID)
    first, last = records[0].recorded_at, records[-1].recorded_at
    span = datetime.fromisoformat(last) - datetime.fromisoformat(first)
    return {
        "name": TABLE_NAME,
        "command": command,
        "executor": type(executor).__name__,
        "isolation": str(getattr(getattr(executor, "isolation", None), "name", "")),
        "warm": bool(getattr(executor, "warm", False)),
        "timeout_s": timeout_s if timeout_s is not None else DEFAULT_TIMEOUT_S,
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
