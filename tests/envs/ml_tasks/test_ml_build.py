"""Building an execution table: real sandboxed runs, logged, normalised, resumable."""

from __future__ import annotations

import math
import sqlite3

import pytest

from wmrl_env.envs.ml_tasks import ExecutionTable, ProgramSpec, get_task
from wmrl_env.envs.ml_tasks.build import RUN_ID, _pending_jobs, build_table
from wmrl_env.envs.ml_tasks.sandbox import default_sandbox
from wmrl_env.sandboxes.replay import ReplayExecutor
from wmrl_env.store import ExecutionLog

PROGRAMS = [
    ProgramSpec.from_id(program_id)
    for program_id in ("standardize-linear-mid", "none-linear-mid", "none-forest-low")
]


@pytest.mark.slow
def test_build_runs_logs_normalises_and_resumes(tmp_path) -> None:
    log, out, messages = tmp_path / "log.sqlite", tmp_path / "t.csv.gz", []
    table = build_table(
        executor=default_sandbox(max_workers=2),
        log_path=log,
        out_path=out,
        command="wmrl build-tables --tasks fertility",
        task_ids=["fertility"],
        programs=PROGRAMS,
        data_root=tmp_path / "data",
        progress=messages.append,
    )
    rows = {row.program_id: row for row in table.rows}
    assert rows["none-linear-mid"].status == "crashed"  # Ridge rejects the missing values
    assert "NaN" in rows["none-linear-mid"].message
    ok = [row for row in table.rows if row.status == "ok"]
    assert len(ok) == 2 and max(row.score for row in ok) == 1.0
    assert math.isnan(rows["none-linear-mid"].score)
    facts = table.metadata["tasks"]["fertility"]
    assert facts["reference"] == max(row.raw_metric for row in ok)
    assert facts["baseline"] == get_task("fertility").baseline
    assert table.metadata["command"] == "wmrl build-tables --tasks fertility"
    assert ExecutionTable.read(out).rows == table.rows
    logged = (
        sqlite3.connect(log)
        .execute("SELECT COUNT(*) FROM executions WHERE run_id = ?", (RUN_ID,))
        .fetchone()
    )
    assert logged == (3,)

    # resuming runs nothing: an executor that knows no job would turn any run into errors
    again = build_table(
        executor=ReplayExecutor([]),
        log_path=log,
        out_path=tmp_path / "again.csv.gz",
        command="resume",
        task_ids=["fertility"],
        programs=PROGRAMS,
        data_root=tmp_path / "data",
        progress=messages.append,
    )
    assert again.rows == table.rows
    assert "3/3 results kept from the log; running 0" in messages


def test_executor_errors_are_not_table_rows_and_are_retried(tmp_path) -> None:
    """An ``error`` result is the executor failing, not the program: it is never a table row,
    and the next build runs that program again."""
    messages: list[str] = []
    with pytest.raises(ValueError, match="the log has no execution of standardize-linear-mid"):
        build_table(
            executor=ReplayExecutor([]),  # knows no program: every result is an error
            log_path=tmp_path / "log.sqlite",
            out_path=tmp_path / "t.csv.gz",
            command="x",
            task_ids=["iris"],
            programs=PROGRAMS[:1],
            data_root=tmp_path / "data",
            progress=messages.append,
        )
    with ExecutionLog(tmp_path / "log.sqlite") as log:
        assert [row.status for row in log.rows()] == ["error"]
        pending = _pending_jobs(log, ["iris"], lambda _: PROGRAMS[:1], None, str(tmp_path / "data"))
        assert len(pending) == 1


def test_tables_accumulate_the_complete_tasks_of_earlier_builds(tmp_path) -> None:
    """A build of one split leaves its executions in the log; the next build's table holds
    them too, and a task with a program missing stays out."""
    from wmrl_env.envs.ml_tasks import load_table
    from wmrl_env.envs.ml_tasks.build import table_from_log
    from wmrl_env.store import LoggingExecutor

    replay = load_table().replay_executor()
    with ExecutionLog(tmp_path / "log.sqlite") as log:
        jobs = _pending_jobs(log, ["iris"], lambda _: PROGRAMS, None, str(tmp_path / "d"))
        jobs += _pending_jobs(log, ["wine"], lambda _: PROGRAMS[:2], None, str(tmp_path / "d"))
        with LoggingExecutor(replay, log, run_id=RUN_ID) as executor:
            executor.run(jobs)
        table = table_from_log(log, ["iris"], lambda _: PROGRAMS, {}, also=["wine", "digits"])
        assert table.task_ids == ("iris",) and len(table.rows) == 3
        with pytest.raises(ValueError, match="no execution of none-forest-low on wine"):
            table_from_log(log, ["wine"], lambda _: PROGRAMS, {})
        table = table_from_log(log, ["wine"], lambda _: PROGRAMS[:2], {}, also=["iris"])
        assert table.task_ids == ("wine", "iris")


def test_unlearnable_tasks_are_named_with_the_reason() -> None:
    from wmrl_env.envs.ml_tasks.build import unlearnable

    def facts(metric, baseline, reference):
        return {"metric": metric, "baseline": baseline, "reference": reference}

    table = ExecutionTable(
        rows=(),
        metadata={
            "tasks": {
                "good": facts("roc_auc", 0.5, 0.8),
                "flat": facts("r2", 0.0, 0.05),
                "rmse_ok": facts("rmse", 10.0, 9.0),  # 19 % of the squared error removed
                "rmse_flat": facts("rmse", 10.0, 9.6),  # 7.8 %
            }
        },
    )
    failing = unlearnable(table)
    assert set(failing) == {"flat", "rmse_flat"}
    assert "gains 5.0%; 10% required" in failing["flat"]
