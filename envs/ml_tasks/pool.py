"""The second suite's execution table: a sampled pool of grammar programs run on each
generated task, both scores of every execution kept, built resumably.

The pool is the same for every task: the first suite's 72 programs (the named subset) and
a seeded sample of the open space (:func:`pool_programs`), run program by program across
the tasks, so a build stopped early still holds the same programs on every task. Each
finished execution is appended to a JSON-lines table and fsynced before the next is
written; run the same command again and it resumes where it stopped (an executor ``error``
is retried). One row::

    {"task_id", "program_id", "program_hash", "status", "valid_raw", "private_raw",
     "exec_seconds", "message"}

``valid_raw`` is the metric on the validation rows (what a reward reads), ``private_raw``
on the private rows (what a deployed program scores; no reward reads it).

Build (live, in the warm local sandbox, niced; see docs/tasks.md for the measured cost)::

    nice python -m wmrl_env.envs.ml_tasks.pool --out runs/pool_v2.jsonl --sampled 48

Example (reading a table):
    >>> rows = [{"task_id": "t", "program_id": p, "status": "ok", "valid_raw": v,
    ...          "private_raw": q} for p, v, q in (("a", .9, .8), ("b", .5, .6), ("c", .7, .7))]
    >>> round(within_task_spearman(rows)["t"], 2)
    1.0
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import as_completed
from pathlib import Path
from typing import Any

import numpy as np

from wmrl_env.executors.base import ExecStatus, Executor
from wmrl_env.utils.hashing import artifact_hash

from .grammar import GrammarProgram, sample_programs, v1_subset
from .headroom import HEADROOM_FAMILIES
from .pool_tasks import private_test_task
from .private_test import PrivateTestTask
from .realdata import REAL_DATA_TASKS

__all__ = [
    "POOL_SEED",
    "POOL_TASKS",
    "REAL_POOL_TASKS",
    "build_pool",
    "pool_programs",
    "pool_replay_executor",
    "read_pool",
    "within_task_spearman",
]

POOL_SEED = 0
POOL_TASKS: tuple[str, ...] = tuple(f"hr_{family}_s0" for family in HEADROOM_FAMILIES)
REAL_POOL_TASKS: tuple[str, ...] = tuple(REAL_DATA_TASKS)


def pool_programs(sampled: int, seed: int = POOL_SEED) -> list[GrammarProgram]:
    """The first suite's 72 programs, then ``sampled`` more drawn from the open space."""
    named = v1_subset()
    extra: list[GrammarProgram] = []
    for program in sample_programs(sampled + len(named), seed):
        if program not in named and len(extra) < sampled:
            extra.append(program)
    return named + extra


def read_pool(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every row of a pool table; a torn last line (a build killed mid-write) is skipped."""
    path = Path(path)
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def pool_replay_executor(
    paths: Sequence[str | os.PathLike[str]] | None = None, tasks: Iterable[str] | None = None
) -> Any:
    """A :class:`~wmrl_env.sandboxes.replay.ReplayExecutor` answering the programs that the
    pool tables at ``paths`` hold (default: the committed tables of the held-out tasks,
    generated and real-data, and of the pretraining tasks) on ``tasks`` (default: every task
    of the tables) as the live sandbox would: the
    validation score normalised like a live run's (trivial baseline 0, the metric's ideal 1),
    and the normalised private score in the result's metadata (``private_score``, which
    :class:`~wmrl_env.envs.ml_tasks.multiturn.MLTaskMultiTurnEnv` reports at the end). The
    first suite's 72 programs render the same text in both spaces, so the structured
    programs of the multi-turn env replay on every task of the second suite."""
    from wmrl_env.sandboxes.replay import ReplayExecutor, ReplayRecord

    from .scoring import normalised_score

    if paths is None:
        data = Path(__file__).resolve().parent / "data"
        paths = [data / name for name in
                 ("pool_v2.jsonl", "pool_real_v1.jsonl", "pool_pretrain_v1.jsonl")]  # fmt: skip
    keep = None if tasks is None else set(tasks)
    built: dict[str, PrivateTestTask] = {}  # each task built once, not once per row
    records = []
    for path in paths:
        for row in read_pool(path):
            if row["status"] == "error":  # the executor failed, not the program
                continue
            if keep is not None and row["task_id"] not in keep:
                continue
            if row["task_id"] not in built:
                built[row["task_id"]] = private_test_task(row["task_id"])
            task = built[row["task_id"]]
            ok = row["status"] == "ok" and row["valid_raw"] is not None
            valid = normalised_score(float(row["valid_raw"]), baseline=task.baseline,
                                     reference=task.reference) if ok else math.nan  # fmt: skip
            private = None
            if ok and row.get("private_raw") is not None:
                private = normalised_score(float(row["private_raw"]),
                                           baseline=task.private_baseline,
                                           reference=task.reference)  # fmt: skip
            metadata = {"private_score": private} if ok else {}
            if ok:
                metadata["raw_metric"] = float(row["valid_raw"])
            records.append(ReplayRecord(row["task_id"], row["program_hash"], row["status"],
                                        valid, float(row["exec_seconds"]), row.get("message", ""),
                                        metadata))  # fmt: skip
    return ReplayExecutor(records)


def build_pool(
    executor: Executor,
    tasks: Sequence[PrivateTestTask],
    programs: Sequence[GrammarProgram],
    out_path: str | os.PathLike[str],
    *,
    data_root: str | os.PathLike[str] | None = None,
    progress: bool = False,
) -> int:
    """Run every program on every task not yet in ``out_path``; return how many ran.

    Results are appended as they finish, each line flushed and fsynced.
    """
    out_path = Path(out_path)
    done = {
        (row["task_id"], row["program_id"])
        for row in read_pool(out_path)
        if row["status"] != ExecStatus.ERROR.value
    }
    pending = [(t, p) for p in programs for t in tasks if (t.task_id, p.id) not in done]
    if not pending:
        return 0
    out_path.parent.mkdir(parents=True, exist_ok=True)
    _drop_torn_line(out_path)
    jobs = [
        task.make_job(
            program.render(task.kind),
            data_root=data_root,
            normalise=False,
            tags={"program_id": program.id},
        )
        for task, program in pending
    ]
    by_job = {job.job_id: pair for job, pair in zip(jobs, pending, strict=True)}
    started = time.monotonic()
    with open(out_path, "a") as table:
        for count, future in enumerate(as_completed(executor.submit(jobs)), start=1):
            result = future.result()
            task, program = by_job[result.job_id]
            row = _row(task, program, result)
            table.write(json.dumps(row) + "\n")
            table.flush()
            os.fsync(table.fileno())
            if progress and count % 20 == 0:
                rate = (time.monotonic() - started) / count
                print(f"{count}/{len(jobs)} executions, {rate:.2f} s each", file=sys.stderr)
    return len(jobs)


def _drop_torn_line(path: Path) -> None:
    """Cut a last line left without its newline (a build killed mid-write), so that the
    next row starts on a line of its own."""
    if not path.exists():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with open(path, "r+b") as file:
            file.truncate(data.rfind(b"\n") + 1)
            file.flush()
            os.fsync(file.fileno())


def _row(task: PrivateTestTask, program: GrammarProgram, result: Any) -> dict[str, Any]:
    valid = private = None
    if result.ok:
        valid = result.score  # the job's scorer: the raw metric on the validation rows
        private = task.private_score(result.outputs)
    return {
        "task_id": task.task_id,
        "program_id": program.id,
        "program_hash": artifact_hash(program.render(task.kind)),
        "status": result.status.value,
        "valid_raw": valid,
        "private_raw": private,
        "exec_seconds": round(result.exec_seconds, 3),
        "message": result.message[:300],
    }


def within_task_spearman(rows: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Per task, the Spearman correlation of validation and private scores over the
    programs that ran (metrics where lower is better correlate the same way)."""
    from scipy.stats import spearmanr

    by_task: dict[str, list[tuple[float, float]]] = {}
    for row in rows:
        if row["status"] == ExecStatus.OK.value:
            by_task.setdefault(row["task_id"], []).append((row["valid_raw"], row["private_raw"]))
    return {
        task: float(spearmanr(*np.array(pairs).T).statistic)
        for task, pairs in sorted(by_task.items())
        if len(pairs) >= 3
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m wmrl_env.envs.ml_tasks.pool",
        description="Build (or resume) the second suite's pool table: the first suite's 72 "
        "programs plus a seeded sample of the open space, on each generated task, live in the "
        "warm local sandbox; both scores of every execution.",
    )
    parser.add_argument("--out", required=True, help="the JSON-lines table (appended to)")
    parser.add_argument("--sampled", type=int, default=48, help="programs beyond the 72")
    parser.add_argument("--seed", type=int, default=POOL_SEED, help="the pool's sample seed")
    parser.add_argument(
        "--tasks",
        nargs="+",
        default=list(POOL_TASKS),
        help="task ids (generated hr_* or real-data rd_*)",
    )
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    if args.sampled < 0 or args.workers < 1:
        parser.error("--sampled must be >= 0 and --workers >= 1")
    try:
        tasks = [private_test_task(t) for t in args.tasks]
    except ValueError as error:
        parser.error(str(error))
    from .sandbox import default_sandbox

    programs = pool_programs(args.sampled, args.seed)
    started = time.monotonic()
    with default_sandbox(max_workers=args.workers, warm=True, suite_programs=True) as sandbox:
        ran = build_pool(sandbox, tasks, programs, args.out, progress=True)
    wall = time.monotonic() - started
    print(json.dumps({"executions": ran, "wall_seconds": round(wall, 1), "workers": args.workers}))


if __name__ == "__main__":
    main()
