"""Run logs survive a writer stopped mid-line: whole lines are kept, the torn one is set aside
and the next line starts after it."""

from __future__ import annotations

import json

import pytest

from wmrl_env.bench.records import RunRecord, StepRecord
from wmrl_env.bench.run_log import append_line, read_lines, read_stamped


def test_a_torn_last_line_is_set_aside_and_the_next_one_starts_after_it(tmp_path) -> None:
    log = tmp_path / "runs.jsonl"
    append_line(log, {"run": 1})
    whole = log.read_bytes()
    with log.open("ab") as handle:  # a writer killed halfway through its line
        handle.write(b'{"run": 2, "steps": [1, 2')
    with pytest.warns(UserWarning, match="line 2: not a whole JSON line"):
        assert read_lines(log) == [(1, {"run": 1})]
    append_line(log, {"run": 3})
    assert log.read_bytes().startswith(whole)
    with pytest.warns(UserWarning, match="line 2"):
        assert [row for _, row in read_lines(log)] == [{"run": 1}, {"run": 3}]
    assert read_lines(tmp_path / "missing.jsonl") == []


def test_a_resumed_per_task_log_keeps_its_finished_runs_past_a_torn_line(tmp_path) -> None:
    """The per-task bench's log: a run torn while being written is made again, the runs
    finished before it are read back, and the log stays readable."""
    from wmrl_env.bench.pertask_bench import _RunLog, run_fingerprint
    from wmrl_env.bench.pertask_config import PerTaskConfig

    made = run_fingerprint(PerTaskConfig(suite="pool"))
    path = tmp_path / "runs.jsonl"
    first = _RunLog(path, made)
    first.get(("main", "wmrl", 0), lambda: RunRecord("wmrl", 0, [StepRecord(step=0)]))
    text = json.dumps({"key": ["main", "wmrl", 1], "run": {}, "made_with": made})
    path.write_text(path.read_text() + text[: len(text) // 2])
    made_again = []

    def make() -> RunRecord:
        made_again.append(1)
        return RunRecord("wmrl", 1, [StepRecord(step=1)])

    with pytest.warns(UserWarning, match="set aside"):
        resumed = _RunLog(path, made)
    assert list(resumed.runs) == [("main", "wmrl", 0)]
    resumed.get(("main", "wmrl", 1), make)
    resumed.get(("main", "wmrl", 0), make)
    assert made_again == [1]
    with pytest.warns(UserWarning, match="line 2"):
        rows = read_stamped(path, made)
    assert [row["key"] for row in rows] == [["main", "wmrl", 0], ["main", "wmrl", 1]]
