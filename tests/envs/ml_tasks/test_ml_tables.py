"""The committed execution table: complete, consistent with the code, and a real landscape."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from wmrl_env.envs.ml_tasks import get_task, load_table, render_program, task_ids
from wmrl_env.envs.ml_tasks.registry import manifest, table_programs
from wmrl_env.envs.ml_tasks.scoring import METRICS
from wmrl_env.envs.ml_tasks.tables import summary_markdown
from wmrl_env.executors import ExecStatus
from wmrl_env.utils.hashing import artifact_hash


@pytest.fixture(scope="module")
def table():
    return load_table()


def test_the_table_programs_on_every_task_of_its_complete_splits_once(table) -> None:
    keys = Counter((row.task_id, row.program_id) for row in table.rows)
    assert set(keys.values()) == {1}
    assert set(table.task_ids) <= set(task_ids("all"))
    expected = {(t, p.id) for t in table.task_ids for p in table_programs(t)}
    assert set(keys) == expected
    for split in table.metadata.get("complete_splits", []):
        assert set(task_ids(split)) <= set(table.task_ids), split


def test_rows_match_the_programs_the_code_renders_today(table) -> None:
    kinds = {task_id: get_task(task_id).kind for task_id in table.task_ids}
    for row in table.rows:
        text = render_program(row.spec, kinds[row.task_id])
        assert row.program_hash == artifact_hash(text), (row.task_id, row.program_id)


def test_statuses_scores_and_messages(table) -> None:
    for row in table.rows:
        assert ExecStatus(row.status)
        assert row.exec_seconds > 0
        if row.status == "ok":
            assert math.isfinite(row.raw_metric) and 0.0 <= row.score <= 1.0
        else:
            assert math.isnan(row.score) and math.isnan(row.raw_metric) and row.message


def test_normalisation_matches_the_metadata_and_the_tasks(table) -> None:
    facts = table.metadata["tasks"]
    for task_id in table.task_ids:
        task = get_task(task_id)
        rows = [row for row in table.for_task(task_id) if row.status == "ok"]
        best = max(rows, key=lambda row: row.score)
        assert best.score == 1.0 and best.raw_metric == facts[task_id]["reference"]
        assert task.reference == facts[task_id]["reference"]
        assert task.baseline == pytest.approx(facts[task_id]["baseline"])  # same split as then
        assert METRICS[task.metric].higher_is_better == facts[task_id]["higher_is_better"]
        for row in rows:
            assert row.score == pytest.approx(task.normalise(row.raw_metric))


def test_the_reward_landscape_has_structure(table) -> None:
    best_per_task, flat = {}, []
    for task_id in table.task_ids:
        scores = [row.score for row in table.for_task(task_id) if row.status == "ok"]
        if max(scores) - min(scores) <= 0.1:
            flat.append(task_id)  # e.g. a wm task whose 20 sampled programs all do well
        best_per_task[task_id] = max(table.for_task(task_id), key=lambda r: r.score).program_id
    assert len(flat) <= 0.1 * len(table.task_ids), f"programs barely differ on {flat}"
    assert len(set(best_per_task.values())) >= 5, "the same program wins almost everywhere"
    statuses = Counter(row.status for row in table.rows)
    assert statuses["crashed"] > 0 and statuses["ok"] > 0.8 * len(table.rows)
    failing_programs = {row.program_id for row in table.rows if row.status != "ok"}
    for program_id in failing_programs:  # failures depend on the task, not only the program
        statuses_of = {row.status for row in table.rows if row.program_id == program_id}
        assert "ok" in statuses_of, f"{program_id} fails on every task"


def test_provenance_is_recorded(table) -> None:
    meta = table.metadata
    assert meta["command"].startswith("wmrl build-tables")
    assert meta["executor"] == "LocalSandbox"
    assert meta["machine"]["cpu_count"] >= 1 and meta["machine"]["scikit-learn"]
    assert meta["wall_seconds_first_to_last"] > 0 and meta["sum_exec_seconds"] > 0


def test_summary(table) -> None:
    summary = {entry["task_id"]: entry for entry in table.summary()}
    assert set(summary) == set(table.task_ids)
    for task_id, entry in summary.items():
        count = len(table_programs(task_id))
        assert entry["programs"] == count and entry["ok"] + sum(entry["failed"].values()) == count
        assert 0.0 <= entry["median_score"] <= 1.0 and entry["median_exec_seconds"] > 0


def test_summary_markdown_has_a_row_per_task(table) -> None:
    text = summary_markdown(table)
    for task_id in table.task_ids:
        assert f"| {task_id} |" in text


def test_rows_with_text_for_world_models(table) -> None:
    rows = table.with_text()
    assert len(rows) == len(table.rows)
    first = rows[0]
    assert first["description"] == get_task(first["task_id"]).description
    assert artifact_hash(first["program"]) == first["program_hash"]
    two = table.task_ids[:2]
    picked = table.with_text(two)
    assert [row["task_id"] for row in picked] == [r.task_id for r in table.rows if r.task_id in two]
    assert picked == [row for row in rows if row["task_id"] in two]


def test_lookup_errors(table) -> None:
    with pytest.raises(KeyError, match="no row for task 'iris'"):
        table.lookup("iris", "scale-forest-mid")


def test_the_table_is_the_current_suites_and_every_task_is_learnable(table) -> None:
    from wmrl_env.envs.ml_tasks.build import MIN_LEARNABLE_GAIN, learnable_gain

    meta = table.metadata
    assert meta["name"] == "table_v1" and "heldout" in meta["complete_splits"]
    assert meta["warm"] is True and meta["isolation"]
    for task_id, facts in meta["tasks"].items():
        gain = learnable_gain(facts["metric"], facts["baseline"], facts["reference"])
        assert gain >= MIN_LEARNABLE_GAIN, task_id
    dropped = {e["task_id"] for e in manifest().get("dropped", [])}
    assert not dropped & set(table.task_ids)


@pytest.mark.slow
def test_replay_equals_a_live_run_bit_for_bit_on_a_sample(table, tmp_path) -> None:
    """Six seeded (task, program) rows, run again live on the warm pool: the same status and
    the same raw metric, to the last bit."""
    import numpy as np

    from wmrl_env.envs.ml_tasks.sandbox import default_sandbox

    rows = [row for row in table.rows if row.exec_seconds < 3.0]
    picks = np.random.default_rng(7).choice(len(rows), size=6, replace=False)
    sample = [rows[int(i)] for i in picks]
    jobs = [
        get_task(row.task_id).make_job(row.program(), data_root=tmp_path, normalise=False)
        for row in sample
    ]
    with default_sandbox(max_workers=2, warm=True) as sandbox:
        results = sandbox.run(jobs)
    for row, result in zip(sample, results, strict=True):
        assert result.status.value == row.status, (row, result.message)
        if row.status == "ok":
            assert result.score == row.raw_metric, row
            assert get_task(row.task_id).normalise(result.score) == row.score
