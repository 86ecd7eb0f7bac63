"""ExecutionLog: round trip, NaN handling, WAL, threads, several processes, exports."""

from __future__ import annotations

import csv
import math
import sqlite3
import subprocess
import sys
import textwrap
import threading

import pytest

from wmrl_env.executors.base import ExecResult, ExecStatus
from wmrl_env.sandboxes.job import Job
from wmrl_env.store import ExecutionLog, export_csv, export_log, export_parquet
from wmrl_env.store.sqlite_log import _switch_to_wal
from wmrl_env.utils.hashing import artifact_hash
from wmrl_env.utils.imports import is_available


def _result(i: int, status: ExecStatus = ExecStatus.OK) -> ExecResult:
    score = i / 10 if status is ExecStatus.OK else math.nan
    return ExecResult(
        job_id=f"job-{i}",
        status=status,
        score=score,
        wall_seconds=1.0 + i,
        exec_seconds=2.0 + i,
        stdout=f"out {i}",
        stderr=f"err {i}",
        message="" if status is ExecStatus.OK else "it failed",
        metadata={"isolation": "rlimits"},
    )


@pytest.fixture
def log(tmp_path):
    with ExecutionLog(tmp_path / "runs" / "log.sqlite") as opened:
        yield opened


def test_record_round_trip(log) -> None:
    row_id = log.record(
        _result(3),
        artifact="print(3)",
        task_id="iris",
        run_id="r1",
        step=7,
        wm_score=0.25,
        metadata={"group": 2},
    )
    [row] = log.rows()
    assert row.id == row_id
    assert (row.job_id, row.task_id, row.run_id, row.step) == ("job-3", "iris", "r1", 7)
    assert (row.status, row.score, row.wm_score) == ("ok", 0.3, 0.25)
    assert (row.wall_seconds, row.exec_seconds) == (4.0, 5.0)
    assert (row.artifact, row.artifact_hash) == ("print(3)", artifact_hash("print(3)"))
    assert (row.stdout, row.stderr, row.metadata) == ("out 3", "err 3", {"group": 2})
    assert row.recorded_at.endswith("+00:00")


def test_nan_scores_are_null_in_sqlite_and_nan_in_python(log) -> None:
    log.record(_result(1, ExecStatus.CRASHED), artifact="1/0")
    [row] = log.rows()
    assert math.isnan(row.score) and math.isnan(row.wm_score)
    assert row.status == "crashed" and row.message == "it failed"
    raw = sqlite3.connect(log.path).execute("SELECT score, wm_score FROM executions").fetchone()
    assert raw == (None, None)


def test_record_job_takes_columns_from_tags(log) -> None:
    job = Job("x = 1", tags={"task_id": "wine", "step": 4, "wm_score": 0.5, "group": 9})
    log.record_job(job, _result(2), run_id="default-run")
    [row] = log.rows()
    assert (row.task_id, row.step, row.wm_score, row.run_id) == ("wine", 4, 0.5, "default-run")
    assert row.metadata == {"tags": {"group": 9}, "result": {"isolation": "rlimits"}}
    log.record_job(Job("x = 2", tags={"run_id": "tagged"}), _result(3), run_id="default-run")
    assert log.rows()[-1].run_id == "tagged"


def test_filters_and_length(log) -> None:
    for i in range(6):
        log.record(_result(i), artifact=f"a{i}", task_id=f"t{i % 2}", run_id=f"r{i % 3}")
    assert len(log) == 6
    assert [r.job_id for r in log.rows(task_id="t0")] == ["job-0", "job-2", "job-4"]
    assert [r.job_id for r in log.rows(task_id="t0", run_id="r0")] == ["job-0"]


def test_bad_input_is_rejected_and_logs_nothing(log) -> None:
    with pytest.raises(TypeError, match="ExecResult"):
        log.record({"status": "ok"}, artifact="x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="artifact"):
        log.record(_result(0), artifact=b"x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="synchronous"):
        ExecutionLog(log.path, synchronous="OFF")  # type: ignore[arg-type]
    assert len(log) == 0


def test_wal_mode_persistence_and_closed_log(tmp_path) -> None:
    path = tmp_path / "log.sqlite"
    log = ExecutionLog(path)
    log.record(_result(1), artifact="a")
    mode = sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"
    log.close()
    log.close()
    with pytest.raises(RuntimeError, match="closed"):
        log.record(_result(2), artifact="b")
    with ExecutionLog(path) as reopened:
        assert [r.job_id for r in reopened.rows()] == ["job-1"]
        assert reopened.integrity_check() == "ok"


def test_refuses_a_newer_schema(tmp_path) -> None:
    path = tmp_path / "log.sqlite"
    ExecutionLog(path).close()
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA user_version=99")
    connection.commit()
    connection.close()
    with pytest.raises(RuntimeError, match="schema version 99"):
        ExecutionLog(path)


def test_many_threads_write_every_row(log) -> None:
    threads, per_thread = 8, 25

    def write(t: int) -> None:
        for i in range(per_thread):
            log.record(_result(i), artifact=f"{t}-{i}", task_id=f"t{t}")

    workers = [threading.Thread(target=write, args=(t,)) for t in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert len(log) == threads * per_thread
    assert len({row.artifact for row in log.rows()}) == threads * per_thread
    assert log.integrity_check() == "ok"


def test_processes_that_open_a_new_file_together_all_append(tmp_path) -> None:
    """Six processes wait on a start file, then open the same new database at once: the WAL
    switch races (SQLite answers "locked" without waiting), and every process must still log."""
    path, start = tmp_path / "shared.sqlite", tmp_path / "start"
    script = textwrap.dedent(
        f"""
        import os, sys, time
        from wmrl_env.executors.base import ExecResult
        from wmrl_env.store import ExecutionLog
        while not os.path.exists({str(start)!r}):
            time.sleep(0.001)
        with ExecutionLog({str(path)!r}) as log:
            for i in range(40):
                log.record(ExecResult(job_id=f"{{sys.argv[1]}}-{{i}}", status="ok", score=1.0),
                           artifact=sys.argv[1])
        """
    )
    names = "abcdef"
    children = [subprocess.Popen([sys.executable, "-c", script, name]) for name in names]
    start.touch()
    assert [child.wait(timeout=120) for child in children] == [0] * len(names)
    with ExecutionLog(path) as log:
        assert len(log) == 40 * len(names)
        assert {row.artifact for row in log.rows()} == set(names)


class _LockedThenFree:
    """A connection whose WAL switch is refused as locked ``refusals`` times."""

    def __init__(self, refusals: int, message: str = "database is locked") -> None:
        self.refusals, self.message, self.calls = refusals, message, 0

    def execute(self, statement: str) -> None:
        self.calls += 1
        if self.calls <= self.refusals:
            raise sqlite3.OperationalError(self.message)


def test_the_wal_switch_retries_a_locked_database_until_its_timeout() -> None:
    conn = _LockedThenFree(refusals=3)
    _switch_to_wal(conn, timeout_s=5.0)
    assert conn.calls == 4
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        _switch_to_wal(_LockedThenFree(refusals=10**6), timeout_s=0.05)
    other = _LockedThenFree(refusals=1, message="disk I/O error")
    with pytest.raises(sqlite3.OperationalError, match="disk I/O"):
        _switch_to_wal(other, timeout_s=5.0)
    assert other.calls == 1


def test_export_csv(log, tmp_path) -> None:
    log.record(_result(1), artifact="a,b\nc", task_id="iris", run_id="r")
    log.record(_result(2, ExecStatus.TIMEOUT), artifact="d", run_id="other")
    path = tmp_path / "out.csv"
    assert export_csv(log, path) == 2
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert rows[0]["artifact"] == "a,b\nc" and rows[0]["score"] == "0.1"
    assert rows[1]["status"] == "timeout" and rows[1]["score"] == ""
    assert export_csv(log, tmp_path / "one.csv", run_id="r") == 1


@pytest.mark.skipif(not is_available("pyarrow"), reason="pyarrow is not installed (tasks extra)")
def test_export_parquet(log, tmp_path) -> None:
    import pyarrow.parquet as pq

    log.record(_result(1), artifact="a", task_id="iris", wm_score=0.3)
    log.record(_result(2, ExecStatus.CRASHED), artifact="b")
    path = tmp_path / "out.parquet"
    assert export_parquet(log, path) == 2
    table = pq.read_table(path).to_pylist()
    assert table[0]["score"] == 0.1 and table[0]["wm_score"] == 0.3
    assert table[1]["score"] is None and table[1]["status"] == "crashed"
    assert export_parquet(log, tmp_path / "empty.parquet", run_id="none") == 0


def test_export_log_by_suffix(log, tmp_path) -> None:
    log.record(_result(1), artifact="a")
    log.close()
    assert export_log(log.path, tmp_path / "x.csv") == 1
    with pytest.raises(ValueError, match=r"\.csv or \.parquet"):
        export_log(log.path, tmp_path / "x.json")
    with pytest.raises(FileNotFoundError):
        export_log(tmp_path / "missing.sqlite", tmp_path / "x.csv")
