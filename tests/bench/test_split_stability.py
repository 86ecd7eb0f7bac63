"""Split stability (issue 22, item 7): the comparison's arithmetic on synthetic score
matrices, the resumable execution log with a fake executor (execution is not the point
there), the normalisation against the table build's, and one real warm-sandbox run."""

from __future__ import annotations

import json
import math
import shutil
from concurrent.futures import Future

import numpy as np
import pytest

from wmrl_env.bench.split_stability import (
    SplitExecution,
    complete_tasks,
    execute_split,
    read_executions,
    split_scores,
    stability,
)
from wmrl_env.executors.base import BaseExecutor, ExecResult, ExecStatus

TASKS = ["wine", "diabetes"]
PROGRAMS = ["none-linear-low", "standardize-forest-mid", "log1p-knn-high"]


class FakeExecutor(BaseExecutor):
    """Answers each job with a raw metric made of its program hash; optionally fails some
    programs with a given status, or stops (as a crash would) after ``crash_after`` jobs."""

    def __init__(self, statuses: dict[str, ExecStatus] | None = None, crash_after=None):
        self.statuses = statuses or {}
        self.crash_after = crash_after
        self.ran: list[tuple[str, str]] = []

    def _submit(self, jobs):
        futures = []
        for job in jobs:
            future: Future = Future()
            if self.crash_after is not None and len(self.ran) >= self.crash_after:
                future.set_exception(KeyboardInterrupt())  # the process dies mid-run
            else:
                program = job.tags["program_id"]
                self.ran.append((job.tags["task_id"], program))
                status = self.statuses.get(program, ExecStatus.OK)
                score = int(job.tags["program_hash"][:6], 16) / 16**6
                future.set_result(ExecResult("j", status, score=score, exec_seconds=0.5))
            futures.append(future)
        return futures

    def _close(self):
        pass


@pytest.fixture(autouse=True)
def data_root(tmp_path, monkeypatch):
    monkeypatch.setenv("WMRL_DATA_DIR", str(tmp_path / "data"))


def test_identical_splits_agree_perfectly() -> None:
    scores = np.random.default_rng(0).uniform(size=(5, 72))
    result = stability(scores, scores)
    assert np.allclose(result.spearman, 1.0) and np.all(result.top1_agreement == 1.0)
    assert np.all(result.b_score_of_a_best == scores.max(axis=1))
    assert result.summary()["regret_both_ways"] == pytest.approx(1.0 - scores.max(axis=1).mean())


def test_independent_splits_agree_by_chance_only() -> None:
    """Scores of split B independent of split A: mean Spearman 0, top-1 agreement 1/72, and
    B's score of A's best the mean of B. Tolerances are 4 standard errors over T = 400 tasks:
    Spearman of independent 72-vectors has sd 1/sqrt(71), so SE = 0.119 / 20 = 0.006; the
    agreement is Bernoulli(1/72), SE = sqrt(0.0139 * 0.986 / 400) = 0.0059; a uniform
    score has sd 0.289, SE = 0.0144."""
    rng = np.random.default_rng(1)
    a, b = rng.uniform(size=(400, 72)), rng.uniform(size=(400, 72))
    result = stability(a, b)
    assert abs(result.spearman.mean()) < 4 * 0.006
    assert abs(result.top1_agreement.mean() - 1 / 72) < 4 * 0.0059
    assert abs(result.b_score_of_a_best.mean() - 0.5) < 4 * 0.0144
    assert abs(result.a_score_of_b_best.mean() - 0.5) < 4 * 0.0144


def test_ties_at_the_top_count_as_a_uniform_pick() -> None:
    a = np.array([[1.0, 1.0, 0.0, 0.5]])
    b = np.array([[0.2, 1.0, 0.4, 0.0]])
    result = stability(a, b)
    assert result.top1_agreement[0] == pytest.approx(0.5)
    assert result.b_score_of_a_best[0] == pytest.approx(0.6)


def test_bad_score_matrices_are_refused() -> None:
    with pytest.raises(ValueError, match="shapes"):
        stability(np.zeros((2, 3)), np.zeros((2, 4)))
    with pytest.raises(ValueError, match="finite"):
        stability(np.full((1, 2), np.nan), np.zeros((1, 2)))


def test_an_interrupted_run_resumes_without_repeating_or_losing_an_execution(
    tmp_path, monkeypatch
) -> None:
    from wmrl_env.bench import split_stability

    # results arrive in submission order (the real order is completion order)
    monkeypatch.setattr(split_stability, "as_completed", iter)
    path = tmp_path / "executions.jsonl"
    crashing = FakeExecutor(crash_after=4)
    with pytest.raises(KeyboardInterrupt):
        execute_split(TASKS, 7, path, crashing, programs=PROGRAMS, progress=lambda _: None)
    kept = read_executions(path)
    assert len(kept) == 4 and len(crashing.ran) == 4  # every finished one was written
    resumed = FakeExecutor()
    records = execute_split(TASKS, 7, path, resumed, programs=PROGRAMS, progress=lambda _: None)
    assert len(resumed.ran) == 2 and not set(resumed.ran) & set(crashing.ran)
    assert {(r.task_id, r.program_id) for r in records} == {(t, p) for t in TASKS for p in PROGRAMS}
    assert complete_tasks(records, TASKS, 7, PROGRAMS) == TASKS
    again = FakeExecutor()
    execute_split(TASKS, 7, path, again, programs=PROGRAMS, progress=lambda _: None)
    assert again.ran == []
    other_split = FakeExecutor()
    execute_split(TASKS[:1], 8, path, other_split, programs=PROGRAMS, progress=lambda _: None)
    assert len(other_split.ran) == 3  # another split seed is another execution


def test_executor_errors_and_a_torn_last_line_are_run_again(tmp_path) -> None:
    path = tmp_path / "executions.jsonl"
    failing = FakeExecutor({PROGRAMS[0]: ExecStatus.ERROR, PROGRAMS[1]: ExecStatus.CRASHED})
    execute_split(TASKS[:1], 7, path, failing, programs=PROGRAMS, progress=lambda _: None)
    text = path.read_text()
    path.write_text(text + text.splitlines()[-1][:30])  # a write cut off by a crash
    with pytest.warns(UserWarning, match="cut-off"):
        assert len(read_executions(path)) == 3
    retry = FakeExecutor()  # cuts the torn line off before appending
    execute_split(TASKS[:1], 7, path, retry, programs=PROGRAMS, progress=lambda _: None)
    # the executor's error is no result; a crashed program is one (it scores 0)
    assert retry.ran == [(TASKS[0], PROGRAMS[0])]
    assert path.read_text().endswith("\n") and len(read_executions(path)) == 4


def test_garbage_inside_the_log_is_a_clear_error(tmp_path) -> None:
    path = tmp_path / "executions.jsonl"
    path.write_text('{"task_id": "wine"}\nnot json\n')
    with pytest.raises(ValueError, match="line 1"):
        read_executions(path)


def test_split_scores_normalise_as_the_table_build_does() -> None:
    from wmrl_env.envs.ml_tasks import get_task

    task = get_task("wine", 7)
    raw = {PROGRAMS[0]: task.baseline, PROGRAMS[1]: 0.9, PROGRAMS[2]: math.nan}
    records = [
        SplitExecution("wine", p, 7, "ok" if math.isfinite(v) else "timeout", v, 1.0, "now")
        for p, v in raw.items()
    ]
    scores = split_scores(records, ["wine"], 7, PROGRAMS)
    assert scores.tolist() == [[0.0, 1.0, 0.0]]
    with pytest.raises(ValueError, match="no execution"):
        split_scores(records, ["wine"], 8, PROGRAMS)


def test_another_split_seed_splits_the_same_data_differently() -> None:
    from wmrl_env.envs.ml_tasks import get_task
    from wmrl_env.envs.ml_tasks.scoring import METRICS
    from wmrl_env.envs.ml_tasks.tasks import SPLIT_SEED

    table, other = get_task("diabetes"), get_task("diabetes", 7)
    assert np.array_equal(get_task("diabetes", SPLIT_SEED).X_test, table.X_test)
    assert len(table.test_ids) == len(other.test_ids)
    assert not np.array_equal(table.X_test, other.X_test)
    rows = lambda task: sorted(map(tuple, np.vstack([task.X_train, task.X_test])))  # noqa: E731
    assert rows(table) == rows(other)
    ideal = METRICS[table.metric].ideal  # the table has no row for split 7: no reference
    assert other.reference == ideal and table.reference != ideal


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="the warm sandbox needs bubblewrap")
def test_live_executions_under_the_table_split_reproduce_the_table(tmp_path) -> None:
    """The script's control, run for real: two programs in the warm sandbox under the
    table's own split seed score exactly the table's raw metrics."""
    from wmrl_env.envs.ml_tasks import load_table
    from wmrl_env.envs.ml_tasks.sandbox import default_sandbox
    from wmrl_env.envs.ml_tasks.tasks import SPLIT_SEED

    path = tmp_path / "executions.jsonl"
    programs = ["standardize-svm-mid", "none-forest-high"]
    with default_sandbox(max_workers=2, warm=True, allow_weak_isolation=False) as sandbox:
        records = execute_split(["wine"], SPLIT_SEED, path, sandbox, programs=programs)
    table = load_table()
    for record in records:
        assert record.status == "ok", record
        assert record.raw_metric == table.lookup("wine", record.program_id).raw_metric
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert {line["program_id"] for line in lines} == set(programs)


def test_a_pick_read_on_another_split_keeps_only_what_the_splits_share() -> None:
    """Scores = a task-independent program quality q plus split noise (sd 0.2 each):
    the best-of-k by split A reads high on A (selection on the noise) and, on B, only the
    q of the pick. With identical splits the two readings agree exactly. The B reading
    minus the pick's q is the mean of B's noise at the picks, independent of the choice:
    sd 0.2 per task, at most 0.2 / sqrt(300) = 0.0115 over 300 tasks (draws of one task are
    correlated, so only the tasks count); tolerance 4 SE = 0.05."""
    from wmrl_env.bench.split_stability import selection_on_other_split

    rng = np.random.default_rng(2)
    quality = rng.uniform(size=(300, 72))
    a = quality + 0.2 * rng.normal(size=quality.shape)
    b = quality + 0.2 * rng.normal(size=quality.shape)
    same = selection_on_other_split(a, a, [8, 72], seeds=50)
    assert all(np.array_equal(x, y) for x, y in same.values())
    read = selection_on_other_split(a, b, [8, 72], seeds=50)
    truth = selection_on_other_split(a, quality, [8, 72], seeds=50)
    for k in (8, 72):
        assert read[k][0].mean() > read[k][1].mean() + 0.1  # the chosen split flatters
        assert abs(read[k][1].mean() - truth[k][1].mean()) < 0.05


def test_the_script_reports_what_the_log_holds(tmp_path) -> None:
    """``benchmarks/split_stability.py --report-only`` on a log whose split-1 raw metrics
    are the table's own: rankings agree (only the baseline moves), files are written."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from wmrl_env.envs.ml_tasks import all_programs, load_table

    table = load_table()
    lines = []
    for task in ("wine", "diabetes"):
        for program in all_programs():
            row = table.lookup(task, program.id)
            raw = None if row.status != "ok" else row.raw_metric
            lines.append(
                json.dumps(
                    SplitExecution(
                        task, program.id, 1, row.status, raw or math.nan, 0.1, "t"
                    ).to_json()
                )
            )
    (tmp_path / "executions.jsonl").write_text("\n".join(lines) + "\n")
    root = Path(__file__).parents[2]
    args = ["--tasks", "39", "--split-seeds", "1", "--report-only", "--out", str(tmp_path)]
    done = subprocess.run(
        [sys.executable, str(root / "benchmarks" / "split_stability.py"), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(root)},  # this checkout's package, not another
    )
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads((tmp_path / "results.json").read_text())
    pair = results["pairs"]["table vs seed 1"]
    assert sorted(pair["task_ids"]) == ["diabetes", "wine"]
    assert pair["spearman"] > 0.95 and pair["top1_agreement"] == 1.0
    assert (tmp_path / "split_stability.png").stat().st_size > 1000
    assert "table vs seed 1" in (tmp_path / "results.md").read_text()
