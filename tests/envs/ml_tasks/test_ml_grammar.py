"""The open program space: its size, its named subset (the first suite's 72), the seeded
sampler, ids, and that every slot value renders a program that runs."""

from __future__ import annotations

import numpy as np
import pytest

from wmrl_env.envs.ml_tasks.datasets import Dataset
from wmrl_env.envs.ml_tasks.grammar import (
    FAMILIES,
    FEATURES,
    IMPUTERS,
    TRANSFORMS,
    GrammarProgram,
    all_grammar_programs,
    sample_programs,
    space_size,
    v1_subset,
)
from wmrl_env.envs.ml_tasks.programs import all_programs, render_program
from wmrl_env.envs.ml_tasks.tasks import MLTask


@pytest.mark.parametrize("kind", ["binary", "multiclass", "regression"])
def test_the_space_holds_over_10000_distinct_programs_with_the_72_inside(kind) -> None:
    texts = {program.render(kind) for program in all_grammar_programs()}
    assert len(texts) == space_size() >= 10_000
    first_suite = {render_program(spec, kind) for spec in all_programs()}
    assert len(first_suite) == 72
    assert first_suite <= texts


def test_the_named_subset_is_the_first_suite_in_order() -> None:
    subset = v1_subset()
    assert [p.v1_spec for p in subset] == all_programs()
    for point, spec in zip(subset, all_programs(), strict=True):
        assert point.render("binary") == render_program(spec, "binary")
    outside = sample_programs(50, seed=3)
    assert sum(p.v1_spec is not None for p in outside) <= 1  # 72 of 139,560


def test_the_sampler_is_seeded_distinct_and_covers_every_slot() -> None:
    a, b = sample_programs(2000, seed=7), sample_programs(2000, seed=7)
    assert a == b and len(set(a)) == 2000
    assert a != sample_programs(2000, seed=8)
    assert {p.imputer for p in a} == set(IMPUTERS)
    assert {p.transform for p in a} == set(TRANSFORMS)
    assert {p.features for p in a} == set(FEATURES)
    counts = {family: sum(p.model == family for p in a) for family in FAMILIES}
    expected = 2000 / len(FAMILIES)  # families uniform: binomial sd ~ 15.6
    assert all(abs(c - expected) < 5 * 15.6 for c in counts.values()), counts


def test_ids_round_trip_and_bad_ids_are_refused() -> None:
    for program in sample_programs(300, seed=1):
        assert GrammarProgram.from_id(program.id) == program
    for bad in (
        "median/standard/none/forest",
        "x/standard/none/svm:1.0,None",
        "none/none/none/svm:7.0,None",
        "none/none/none/svm:1.0",
    ):
        with pytest.raises(ValueError, match=r"grammar program id|must be one of"):
            GrammarProgram.from_id(bad)


def _toy(kind: str) -> MLTask:
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, size=(200, 6))
    signal = X[:, 0] * X[:, 1] + np.sin(6 * X[:, 2])
    y = signal if kind == "regression" else (signal > np.median(signal)).astype(np.int64)
    if kind == "multiclass":
        y = np.digitize(signal, np.quantile(signal, [0.33, 0.66]))
    data = Dataset("toy", "Toy", "Rows.", kind, "y", X, y, tuple(f"x{i}" for i in range(6)))
    metric = {"binary": "roc_auc", "multiclass": "accuracy", "regression": "r2"}[kind]
    return MLTask.from_dataset("toy", data, metric=metric)


@pytest.mark.parametrize("kind", ["binary", "multiclass", "regression"])
def test_every_slot_value_renders_a_program_that_runs(kind, tmp_path, monkeypatch) -> None:
    """One program per imputer, transform, feature step and family (hyperparameters at
    their grid's last value), executed in-process on a small task; each must score."""
    task = _toy(kind)
    (tmp_path / "inputs").mkdir()
    for name, content in task.csv_files.items():
        (tmp_path / "inputs" / name).write_bytes(content)
    monkeypatch.chdir(tmp_path)
    base = ("median", "standard", "none")
    programs = [GrammarProgram(i, "standard", "none", "linear", (1.0,)) for i in IMPUTERS]
    programs += [GrammarProgram("median", t, "none", "linear", (1.0,)) for t in TRANSFORMS]
    programs += [GrammarProgram("median", "standard", f, "linear", (1.0,)) for f in FEATURES]
    programs += [
        GrammarProgram(*base, name, tuple(values[-1] for _, values in family.grid))
        for name, family in FAMILIES.items()
    ]
    for program in programs:
        exec(compile(program.render(kind), program.id, "exec"), {"__name__": "__main__"})
        score = task.evaluate({"predictions.csv": (tmp_path / "predictions.csv").read_bytes()})
        assert score > task.baseline, (program.id, score, task.baseline)
