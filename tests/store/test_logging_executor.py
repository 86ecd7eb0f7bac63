"""LoggingExecutor: a conforming executor whose every result is committed before it is seen,
and which loses no finished execution when its process is killed mid-batch."""

from __future__ import annotations

import logging
import math
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from concurrent.futures import Future, as_completed

import pytest

from wmrl_env.executors import ExecResult, ExecStatus
from wmrl_env.executors.base import BaseExecutor
from wmrl_env.sandboxes import Job, JsonScore, LocalSandbox
from wmrl_env.store import ExecutionLog, LoggingExecutor
from wmrl_env.testing import ExecutorContract

SCORE = JsonScore("score.json")


def score_job(i: int, **tags) -> Job:
    program = f"import json\njson.dump({{'score': {i}}}, open('score.json', 'w'))\n"
    return Job(program, output_files=SCORE.files, scorer=SCORE, tags=tags)


class TestLoggingExecutorContract(ExecutorContract):
    """The wrapper is itself an executor: the shared contract holds through it."""

    @pytest.fixture(autouse=True)
    def _log_path(self, tmp_path):
        self.log_path = tmp_path / "contract.sqlite"

    def make_executor(self) -> LoggingExecutor:
        return LoggingExecutor(LocalSandbox(timeout_s=30, memory_mb=512), self.log_path)

    def make_ok_job(self, i: int) -> Job:
        return score_job(i)

    def expected_score(self, i: int) -> float:
        return float(i)

    def make_failing_job(self) -> Job:
        return Job("raise SystemExit(3)")


def test_every_result_is_committed_before_the_caller_sees_it(tmp_path) -> None:
    path = tmp_path / "log.sqlite"
    jobs = [score_job(i, task_id="t", step=i, wm_score=i / 10, group=i % 2) for i in range(4)]
    jobs.append(Job("raise SystemExit(2)", tags={"task_id": "t", "step": 4}))
    with LoggingExecutor(LocalSandbox(timeout_s=30, memory_mb=512), path, run_id="r") as executor:
        for future in as_completed(executor.submit(jobs)):
            result = future.result()
            reader = sqlite3.connect(path)  # another connection: sees only committed rows
            found = reader.execute(
                "SELECT status FROM executions WHERE job_id = ?", (result.job_id,)
            ).fetchall()
            reader.close()
            assert found == [(result.status.value,)]
        rows = {row.job_id: row for row in executor.log.rows()}
    for i, job in enumerate(jobs[:4]):
        row = rows[job.job_id]
        assert (row.status, row.score, row.step, row.wm_score) == ("ok", float(i), i, i / 10)
        assert row.run_id == "r" and row.task_id == "t" and row.artifact == job.program
        assert row.metadata["tags"] == {"group": i % 2}
        assert row.metadata["result"]["isolation"]  # what the sandbox applied is kept
    failed = rows[jobs[4].job_id]
    assert failed.status == "crashed" and math.isnan(failed.score) and failed.message


class _RaisingExecutor(BaseExecutor[Job]):
    """Breaks the contract on purpose: its futures raise."""

    def _submit(self, jobs):
        futures = []
        for _ in jobs:
            future: Future[ExecResult] = Future()
            future.set_exception(RuntimeError("worker died"))
            futures.append(future)
        return futures

    def _close(self) -> None:
        pass


def test_a_raising_executor_still_yields_logged_error_results(tmp_path) -> None:
    with LoggingExecutor(_RaisingExecutor(), tmp_path / "log.sqlite") as executor:
        [result] = executor.run([Job("x = 1")])
        [row] = executor.log.rows()
    assert result.status is ExecStatus.ERROR and "worker died" in result.message
    assert row.status == "error" and row.job_id == result.job_id


def test_a_failed_write_keeps_the_result(tmp_path, caplog) -> None:
    log = ExecutionLog(tmp_path / "log.sqlite")
    log.close()  # every write now fails
    executor = LoggingExecutor(LocalSandbox(timeout_s=30, memory_mb=512), log)
    with caplog.at_level(logging.ERROR, logger="wmrl_env.store.logging_executor"):
        [result] = executor.run([score_job(7)])
    executor.close()
    assert result.ok and result.score == 7.0
    assert [(job.program, kept.score) for job, kept in executor.unrecorded] == [
        (score_job(7).program, 7.0)
    ]
    assert "could not log the execution" in caplog.text


def test_rejects_what_is_not_an_executor(tmp_path) -> None:
    with pytest.raises(TypeError, match="submit"):
        LoggingExecutor(object(), tmp_path / "log.sqlite")  # type: ignore[arg-type]


def test_close_closes_the_wrapped_executor_and_an_owned_log(tmp_path) -> None:
    sandbox = LocalSandbox(timeout_s=30, memory_mb=512)
    executor = LoggingExecutor(sandbox, tmp_path / "log.sqlite")
    executor.close()
    assert sandbox.closed
    with pytest.raises(RuntimeError, match="closed"):
        len(executor.log)
    shared = ExecutionLog(tmp_path / "shared.sqlite")
    LoggingExecutor(LocalSandbox(), shared, close_executor=False).close()
    assert len(shared) == 0  # a log passed in stays open
    shared.close()


_CHILD = textwrap.dedent(
    """
    import sys
    from concurrent.futures import as_completed
    from wmrl_env.sandboxes import Job, JsonScore, LocalSandbox
    from wmrl_env.store import LoggingExecutor

    score = JsonScore("score.json")
    jobs = [
        Job(
            "import json, time\\n"
            f"time.sleep({0.05 * (i % 4)})\\n"
            f"json.dump({{'score': {i}}}, open('score.json', 'w'))\\n",
            output_files=score.files,
            scorer=score,
            job_id=f"job-{i}",
            tags={"task_id": "kill-test", "step": i},
        )
        for i in range(int(sys.argv[2]))
    ]
    sandbox = LocalSandbox(timeout_s=30, memory_mb=512, max_workers=2)
    executor = LoggingExecutor(sandbox, sys.argv[1], run_id="kill")
    for future in as_completed(executor.submit(jobs)):
        print(future.result().job_id, flush=True)  # only after its row is committed
    print("finished", flush=True)
    """
)


@pytest.mark.slow
def test_sigkill_mid_batch_loses_no_finished_execution(tmp_path) -> None:
    path, batch, kill_after = tmp_path / "log.sqlite", 60, 10
    script = tmp_path / "child.py"
    script.write_text(_CHILD)
    child = subprocess.Popen(
        [sys.executable, str(script), str(path), str(batch)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, killed below as a whole
    )
    finished: list[str] = []
    try:
        while len(finished) < kill_after:
            line = child.stdout.readline()
            assert line, f"the child exited early (status {child.wait()})"
            finished.append(line.strip())
    finally:
        os.killpg(child.pid, signal.SIGKILL)  # no cleanup, no close, no WAL checkpoint
    finished += [line.strip() for line in child.stdout.read().splitlines()]
    assert child.wait(timeout=30) == -signal.SIGKILL
    assert "finished" not in finished, "the batch completed before the kill: nothing tested"
    time.sleep(1.0)  # let any orphaned job process end

    with ExecutionLog(path) as log:
        assert log.integrity_check() == "ok"
        rows = {row.job_id: row for row in log.rows(run_id="kill")}
    assert set(finished) <= set(rows), f"lost: {sorted(set(finished) - set(rows))}"
    assert len(rows) < batch
    for job_id in finished:
        assert rows[job_id].status == "ok"
        assert rows[job_id].score == float(job_id.removeprefix("job-"))
