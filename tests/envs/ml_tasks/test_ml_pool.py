"""The pool build: both scores per execution, appended and fsynced, resumed where it stopped."""

from __future__ import annotations

import json

import numpy as np
import pytest

from wmrl_env.envs.ml_tasks.datasets import Dataset
from wmrl_env.envs.ml_tasks.grammar import GrammarProgram, v1_subset
from wmrl_env.envs.ml_tasks.pool import (
    build_pool,
    pool_programs,
    read_pool,
    within_task_spearman,
)
from wmrl_env.envs.ml_tasks.private_test import PrivateTestTask
from wmrl_env.envs.ml_tasks.sandbox import default_sandbox
from wmrl_env.utils.hashing import artifact_hash


def _task() -> PrivateTestTask:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 4))
    y = X[:, 0] * X[:, 1] + X[:, 2] + 0.3 * rng.normal(size=400)
    data = Dataset("toy", "Toy", "Rows.", "regression", "y", X, y, ("a", "b", "c", "d"))
    return PrivateTestTask.from_dataset("toy", data, metric="r2", private_fraction=0.5)


PROGRAMS = [
    GrammarProgram.from_id("median/standard/none/linear:1.0"),
    GrammarProgram.from_id("none/none/none/boosting:60,0.1,None,None"),
    GrammarProgram.from_id("none/log1p/none/svm:1.0,None"),  # log1p of negatives: NaN, crash
]


def test_pool_programs_hold_the_named_subset_then_a_seeded_sample() -> None:
    pool = pool_programs(30, seed=4)
    assert pool[:72] == v1_subset() and len(set(pool)) == 102
    assert pool == pool_programs(30, seed=4) and pool != pool_programs(30, seed=5)


@pytest.mark.slow
def test_the_build_keeps_both_scores_and_resumes(tmp_path) -> None:
    task, table = _task(), tmp_path / "pool.jsonl"
    with default_sandbox(max_workers=2, warm=True, suite_programs=True) as sandbox:
        assert build_pool(sandbox, [task], PROGRAMS[:2], table, data_root=tmp_path) == 2
        assert build_pool(sandbox, [task], PROGRAMS[:2], table, data_root=tmp_path) == 0
        with open(table, "a") as file:  # a build killed mid-line
            file.write('{"task_id": "toy", "program_id": "none/log1p')
        assert build_pool(sandbox, [task], PROGRAMS, table, data_root=tmp_path) == 1
    rows = {row["program_id"]: row for row in read_pool(table)}
    assert sorted(rows) == sorted(p.id for p in PROGRAMS)  # in the order they finished
    linear, boosting, failing = (rows[p.id] for p in PROGRAMS)
    assert failing["status"] == "crashed" and failing["valid_raw"] is None
    assert failing["private_raw"] is None and "NaN" in failing["message"]
    for row in (linear, boosting):
        assert row["status"] == "ok" and row["exec_seconds"] > 0
        assert 0.2 < row["valid_raw"] < 1 and 0.2 < row["private_raw"] < 1
    assert boosting["private_raw"] > linear["private_raw"]  # the interaction x0 * x1
    assert linear["program_hash"] == artifact_hash(PROGRAMS[0].render("regression"))
    lines = table.read_text().splitlines()
    assert sum(1 for line in lines if line.endswith("}")) == 3  # nothing ran twice


def test_within_task_spearman_reads_ok_rows_per_task() -> None:
    rows = [
        {"task_id": "a", "status": "ok", "valid_raw": v, "private_raw": p}
        for v, p in ((1, 1), (2, 3), (3, 2), (4, 4))
    ]
    rows += [{"task_id": "a", "status": "crashed", "valid_raw": None, "private_raw": None}]
    rows += [{"task_id": "b", "status": "ok", "valid_raw": v, "private_raw": -v} for v in range(5)]
    assert within_task_spearman(rows) == pytest.approx({"a": 0.8, "b": -1.0})
    assert json.dumps(within_task_spearman(rows[:2])) == "{}"  # too few programs


def test_the_summary_deploys_by_validation_and_never_reads_private_to_choose() -> None:
    """Two tasks, three programs. On each task the program with the best validation score is
    not the best on the private test; the constant program is chosen on the other task's
    validation scores."""
    from wmrl_env.envs.ml_tasks.headroom import headroom_task
    from wmrl_env.envs.ml_tasks.pool_report import summarise

    first_suite = v1_subset()[0].id
    scores = {  # task -> program -> (valid r2, private r2)
        "hr_interactions_s0": {"p": (0.9, 0.5), "q": (0.8, 0.8), first_suite: (0.1, 0.1)},
        "hr_outliers_s0": {"p": (0.2, 0.2), "q": (0.7, 0.6), first_suite: (0.6, 0.7)},
    }
    rows = [
        {"task_id": t, "program_id": p, "status": "ok", "valid_raw": v, "private_raw": q}
        for t, table in scores.items()
        for p, (v, q) in table.items()
    ]
    rows.append(dict(rows[-1], program_id="r", status="timeout", valid_raw=None))
    summary = summarise(rows, draws=10)
    one, two = summary["hr_interactions_s0"], summary["hr_outliers_s0"]
    assert one["programs"] == 3  # "r" ran on one task only
    base = headroom_task("hr_interactions_s0").private_baseline
    assert one["validation_search"] == pytest.approx((0.5 - base) / (0.8 - base))
    assert one["constant_program"] == "q"  # best validation on hr_outliers_s0
    assert one["best_constant"] == 1.0 and one["random_16"] == pytest.approx(
        one["validation_search"]
    )  # 16 draws of 3 programs: every program, so validation search
    assert two["constant_program"] == "p"  # best validation on hr_interactions_s0
    base = headroom_task("hr_outliers_s0").private_baseline
    assert two["best_constant"] == pytest.approx((0.2 - base) / (0.7 - base))
    assert two["first_suite_best"] == 1.0 and one["first_suite_best"] < 0.2
