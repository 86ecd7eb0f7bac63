"""ReplayExecutor: the shared Executor contract on the committed table, and its own rules."""

from __future__ import annotations

import csv
import gzip
import math

import pytest

from wmrl_env.envs.ml_tasks import get_task, load_table
from wmrl_env.executors import ExecStatus
from wmrl_env.sandboxes import Job
from wmrl_env.sandboxes.replay import ReplayExecutor, ReplayRecord
from wmrl_env.testing import ExecutorContract
from wmrl_env.utils.hashing import artifact_hash


def _job(row) -> Job:
    return get_task(row.task_id).make_job(row.program())


class TestReplayExecutorContract(ExecutorContract):
    failing_statuses = (ExecStatus.CRASHED,)

    @pytest.fixture(autouse=True)
    def _rows(self):
        table = load_table()
        self.ok_rows = [row for row in table.rows if row.status == "ok"][::97]
        self.crashed = next(row for row in table.rows if row.status == "crashed")

    def make_executor(self) -> ReplayExecutor:
        return load_table().replay_executor()

    def make_ok_job(self, i: int) -> Job:
        return _job(self.ok_rows[i])

    def expected_score(self, i: int) -> float:
        return self.ok_rows[i].score

    def make_failing_job(self) -> Job:
        return _job(self.crashed)


def test_charges_the_recorded_seconds_and_reports_the_raw_metric() -> None:
    row = load_table().lookup("digits", "none-svm-mid")
    with load_table().replay_executor() as executor:
        [result] = executor.run([_job(row)])
    assert result.exec_seconds == row.exec_seconds and result.wall_seconds < 0.1
    assert result.score == row.score and result.metadata["raw_metric"] == row.raw_metric
    assert result.metadata["replay"] and result.metadata["program_id"] == "none-svm-mid"


def test_unknown_jobs_are_error_results_never_scores() -> None:
    records = [ReplayRecord("t", artifact_hash("a = 1"), "ok", 0.5, 2.0)]
    with ReplayExecutor(records) as executor:
        results = executor.run(
            [
                Job("a = 2", tags={"task_id": "t"}),
                Job("a = 1", tags={"task_id": "u"}),
                Job("a = 1"),
                Job("a = 1", tags={"task_id": "t", "program_hash": artifact_hash("b")}),
            ]
        )
    assert [r.status for r in results] == [ExecStatus.ERROR] * 4
    assert all(math.isnan(r.score) and r.exec_seconds == 0 for r in results)
    assert "holds 1 programs for this task" in results[0].message
    assert "holds 0 programs" in results[1].message
    assert "no 'task_id' tag" in results[2].message
    assert "does not match its program text" in results[3].message


def test_records_are_checked() -> None:
    key = artifact_hash("x")
    with pytest.raises(ValueError, match="two records"):
        ReplayExecutor([ReplayRecord("t", key, "ok", 1.0, 1.0)] * 2)
    with pytest.raises(ValueError, match="ok without score"):
        ReplayRecord("t", key, "ok", math.nan, 1.0)
    with pytest.raises(ValueError, match="exec_seconds"):
        ReplayRecord("t", key, "ok", 1.0, -1.0)
    with pytest.raises(ValueError):
        ReplayRecord("t", key, "finished", 1.0, 1.0)
    with pytest.raises(TypeError, match="Job"):
        ReplayExecutor([]).run(["print(1)"])  # type: ignore[list-item]


def test_from_csv_reads_plain_and_gzipped_tables(tmp_path) -> None:
    rows = [
        {
            "task_id": "t",
            "program_hash": artifact_hash("a"),
            "status": "ok",
            "score": "0.25",
            "exec_seconds": "3.5",
            "message": "",
            "program_id": "p1",
        },
        {
            "task_id": "t",
            "program_hash": artifact_hash("b"),
            "status": "timeout",
            "score": "",
            "exec_seconds": "30",
            "message": "time limit",
            "program_id": "p2",
        },
    ]
    for name, opener in (("table.csv", open), ("table.csv.gz", gzip.open)):
        with opener(tmp_path / name, "wt", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        executor = ReplayExecutor.from_csv(tmp_path / name)
        ok, late = executor.run([Job("a", tags={"task_id": "t"}), Job("b", tags={"task_id": "t"})])
        assert (ok.score, ok.exec_seconds, ok.metadata["program_id"]) == (0.25, 3.5, "p1")
        assert late.status is ExecStatus.TIMEOUT and late.message == "time limit"
        assert len(executor) == 2
    (tmp_path / "bad.csv").write_text("task_id,score\nt,1\n")
    with pytest.raises(ValueError, match="lacks columns"):
        ReplayExecutor.from_csv(tmp_path / "bad.csv")


def test_the_whole_table_replays() -> None:
    table = load_table()
    executor = table.replay_executor()
    assert len(executor) == len(table.rows)
    sample = table.rows[::50]
    results = executor.run([_job(row) for row in sample])
    for row, result in zip(sample, results, strict=True):
        assert result.status.value == row.status
        assert result.score == row.score or (math.isnan(result.score) and math.isnan(row.score))
