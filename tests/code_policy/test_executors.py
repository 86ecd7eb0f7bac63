"""Real executions of the policy's programs: the table's programs replayed, every other one
run live (and scoring as the table recorded for the same model), program failures scored as
failures, infrastructure failures left alone."""

from __future__ import annotations

import math

import pytest

from wmrl_env.code_policy import ReplayOrLiveExecutor, ScoreProgramFailures, execute_programs
from wmrl_env.envs.ml_tasks import get_task, load_table
from wmrl_env.envs.ml_tasks.sandbox import default_sandbox
from wmrl_env.executors import ExecStatus
from wmrl_env.sandboxes import Job, ReplayExecutor, ReplayRecord
from wmrl_env.testing import ExecutorContract
from wmrl_env.utils.hashing import artifact_hash

pytestmark = pytest.mark.slow

FAST = ("iris", "standardize-linear-mid")  # a table row that runs live in well under a second


def _row():
    return load_table().lookup(*FAST)


class TestReplayOrLiveContract(ExecutorContract):
    """Even jobs are the table's program (replayed), odd ones the same program with a comment
    (not in the table: run live); both must score what the table recorded."""

    failing_statuses = (ExecStatus.CRASHED,)

    def make_executor(self) -> ReplayOrLiveExecutor:
        return ReplayOrLiveExecutor(load_table().replay_executor(), default_sandbox(1))

    def make_ok_job(self, i: int) -> Job:
        program = _row().program() + ("" if i % 2 == 0 else f"# live copy {i}\n")
        return get_task(FAST[0]).make_job(program)

    def expected_score(self, i: int) -> float:
        return _row().score

    def make_failing_job(self) -> Job:
        return get_task(FAST[0]).make_job("raise SystemExit(3)\n")


def test_replayed_jobs_charge_recorded_seconds_and_others_run_live() -> None:
    row = _row()
    task = get_task(FAST[0])
    with ReplayOrLiveExecutor(load_table().replay_executor(), default_sandbox(1)) as executor:
        replayed, live = executor.run(
            [task.make_job(row.program()), task.make_job(row.program() + "\n")]
        )
        assert (executor.n_replayed, executor.n_live) == (1, 1)
    assert replayed.metadata["replay"] and replayed.exec_seconds == row.exec_seconds
    assert not live.metadata.get("replay") and live.score == pytest.approx(row.score, abs=1e-9)


def test_program_failures_score_as_failures_and_infrastructure_failures_stay() -> None:
    crash = ReplayRecord("t", artifact_hash("boom()"), "timeout", math.nan, 20.0, "too slow")
    fine = ReplayRecord("t", artifact_hash("fit()"), "ok", 0.7, 1.0)
    with ScoreProgramFailures(ReplayExecutor([crash, fine]), failure_score=-1.0) as executor:
        failed, ok, missing = executor.run(
            [Job(p, tags={"task_id": "t"}) for p in ("boom()", "fit()", "other()")]
        )
    assert failed.ok and failed.score == -1.0 and failed.metadata["program_status"] == "timeout"
    assert failed.exec_seconds == 20.0 and failed.message == "too slow"
    assert ok.score == 0.7 and "program_status" not in ok.metadata
    assert missing.status is ExecStatus.ERROR and math.isnan(missing.score)


def test_execute_programs_reports_parse_status_score_and_grid_membership() -> None:
    row = _row()
    programs = [row.program(), row.program() + "\n", "def broken(:\n"]
    with ScoreProgramFailures(
        ReplayOrLiveExecutor(load_table().replay_executor(), default_sandbox(1))
    ) as executor:
        outcomes = execute_programs([FAST[0]] * 3, programs, executor)
    assert [o.in_grid for o in outcomes] == [True, False, False]
    assert [o.parses for o in outcomes] == [True, True, False]
    assert [o.status for o in outcomes] == ["ok", "ok", "crashed"]
    assert outcomes[1].score == pytest.approx(row.score) and outcomes[2].score == 0.0
    with pytest.raises(ValueError, match="task ids for"):
        execute_programs(["iris"], programs, executor)
