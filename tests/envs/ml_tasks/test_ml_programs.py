"""The structured program space and its rendered programs."""

from __future__ import annotations

import ast

import numpy as np
import pytest

from wmrl_env.envs.ml_tasks.programs import (
    CAPACITIES,
    MODELS,
    PREPROCESSINGS,
    ProgramSpec,
    all_programs,
    program_space,
    render_program,
)
from wmrl_env.utils.hashing import artifact_hash

KINDS = ("binary", "multiclass", "regression")


def test_space_size_and_index_round_trip() -> None:
    programs = all_programs()
    assert len(programs) == len(PREPROCESSINGS) * len(MODELS) * len(CAPACITIES) == 72
    assert [p.index for p in programs] == list(range(72))
    assert len({p.id for p in programs}) == 72
    for spec in programs:
        assert ProgramSpec.from_index(spec.index) == spec
        assert ProgramSpec.from_id(spec.id) == spec
        assert ProgramSpec.from_action(spec.action) == spec
        assert program_space().contains(spec.action)


def test_every_sample_of_the_space_is_a_program() -> None:
    space = program_space(seed=0)
    for _ in range(50):
        assert isinstance(ProgramSpec.from_action(space.sample()), ProgramSpec)


def test_structured_actions_in_every_accepted_form() -> None:
    spec = ProgramSpec("log1p", "svm", "high")
    assert ProgramSpec.from_action(spec) is spec
    assert ProgramSpec.from_action("log1p-svm-high") == spec
    assert ProgramSpec.from_action((2, 5, 2)) == spec
    assert ProgramSpec.from_action(np.array([2, 5, 2])) == spec
    assert ProgramSpec.from_action({"preprocessing": 2, "model": "svm", "capacity": 2}) == spec


@pytest.mark.parametrize(
    ("action", "error", "message"),
    [
        ([0, 6, 0], ValueError, r"model index must be in \[0, 6\)"),
        ([0, 1], ValueError, "needs 3 entries"),
        ({"model": "svm"}, ValueError, "lacks"),
        ("standardize-forest", ValueError, "must look like"),
        ("scale-forest-mid", ValueError, "preprocessing must be one of"),
        (3.5, TypeError, "structured action"),
    ],
)
def test_bad_structured_actions_are_rejected(action, error, message) -> None:
    with pytest.raises(error, match=message):
        ProgramSpec.from_action(action)


def test_from_index_range() -> None:
    with pytest.raises(ValueError, match=r"\[0, 72\)"):
        ProgramSpec.from_index(72)


@pytest.mark.parametrize("kind", KINDS)
def test_every_program_is_valid_python_with_the_solution_protocol(kind) -> None:
    hashes = set()
    for spec in all_programs():
        text = render_program(spec, kind)
        ast.parse(text)
        assert "inputs/train.csv" in text and '"predictions.csv"' in text
        assert 'header="id,prediction"' in text
        assert "random_state=0" in text or spec.model in ("linear", "knn", "svm")
        hashes.add(artifact_hash(text))
    assert len(hashes) == 72


def test_rendering_follows_the_choices() -> None:
    binary = render_program(ProgramSpec("poly2", "svm", "high"), "binary")
    assert "PolynomialFeatures(degree=2" in binary and "SVC(C=100.0)" in binary
    assert "decision_function" in binary  # SVC has no predict_proba by default
    regression = render_program(ProgramSpec("none", "linear", "low"), "regression")
    assert "Ridge(alpha=100.0)" in regression and "make_pipeline" not in regression
    assert "SimpleImputer" not in regression  # 'none' does not impute
    multiclass = render_program(ProgramSpec("standardize", "knn", "high"), "multiclass")
    assert "KNeighborsClassifier(n_neighbors=3)" in multiclass and '"%d"' in multiclass
    with pytest.raises(ValueError, match="kind must be one of"):
        render_program(ProgramSpec("none", "knn", "low"), "ranking")  # type: ignore[arg-type]
