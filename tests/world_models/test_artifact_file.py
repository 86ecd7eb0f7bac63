"""The .npz state file: what it stores comes back equal; what it cannot store is refused."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from wmrl_env.world_models.artifact_file import read_state, write_state
from wmrl_env.world_models.programs.task_residual import ResidualPrior


def test_a_state_comes_back_equal_with_its_types(tmp_path):
    prior = ResidualPrior(0.1, 0.2, 0.3, np.array([1.0, 2.0]), np.array([0, 1]), np.ones(2))
    state = {
        "none": None, "flag": True, "count": np.int64(7), "value": float("nan"), "text": "é",
        "pair": (1, (2.5, "x")), "items": [1, [2]], "names": {"a": ("b", "c")},
        "matrix": np.arange(6.0).reshape(2, 3), "labels": np.array(["p", "q"]), "prior": prior,
    }  # fmt: skip
    loaded = read_state(write_state(state, tmp_path / "state.npz"))
    assert loaded["pair"] == (1, (2.5, "x")) and loaded["items"] == [1, [2]]
    assert loaded["names"] == {"a": ("b", "c")} and type(loaded["count"]) is int
    assert loaded["none"] is None and loaded["flag"] is True and np.isnan(loaded["value"])
    np.testing.assert_array_equal(loaded["matrix"], state["matrix"])
    np.testing.assert_array_equal(loaded["labels"], state["labels"])
    assert isinstance(loaded["prior"], ResidualPrior)
    np.testing.assert_array_equal(loaded["prior"].block_signal, prior.block_signal)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (np.array([object()]), "arrays of Python objects"),
        ({1: 2}, "keys must be strings"),
        (object(), "a object cannot be saved"),
        (np.random.default_rng(0), "a Generator cannot be saved"),
    ],
)
def test_what_cannot_be_stored_is_refused_and_nothing_written(value, message, tmp_path):
    with pytest.raises(TypeError, match=message):
        write_state({"x": value}, tmp_path / "state.npz")
    assert not (tmp_path / "state.npz").exists()


def test_a_file_that_is_not_a_state_is_refused(tmp_path):
    np.savez(tmp_path / "plain.npz", x=np.zeros(2))
    with pytest.raises(ValueError, match="not a saved world-model state"):
        read_state(tmp_path / "plain.npz")
    np.savez(tmp_path / "other.npz", header=np.array('{"format": "other"}'))
    with pytest.raises(ValueError, match="not a saved world-model state"):
        read_state(tmp_path / "other.npz")


@pytest.mark.parametrize(
    "named", ["wmrl_env.world_models.no_such_module:TreeEnsemble", "wmrl_env.world_models:Nothing"]
)
def test_a_state_naming_a_class_this_version_lacks_is_refused_clearly(named, tmp_path):
    header = {"format": "wmrl-state", "container": 1}
    header["state"] = {"x": {"dataclass": named, "fields": {}}}
    np.savez(tmp_path / "old.npz", header=np.array(json.dumps(header)))
    with pytest.raises(ValueError, match="which this version of wmrl_env does not have"):
        read_state(tmp_path / "old.npz")


def test_a_state_saved_before_the_program_models_moved_still_loads(tmp_path):
    """Release 0.2.0 wrote ``wmrl_env.world_models.task_residual`` (now under ``programs``)."""
    prior = ResidualPrior(0.1, 0.2, 0.3, np.array([1.0, 2.0]), np.array([0, 1]), np.ones(2))
    path = write_state({"prior": prior}, tmp_path / "state.npz")
    with np.load(path) as stored:
        arrays = {name: stored[name] for name in stored.files if name != "header"}
        header = str(stored["header"]).replace(".programs.task_residual", ".task_residual")
    assert '"wmrl_env.world_models.task_residual:ResidualPrior"' in header
    np.savez(tmp_path / "old.npz", header=np.array(header), **arrays)
    loaded = read_state(tmp_path / "old.npz")["prior"]
    assert isinstance(loaded, ResidualPrior)
    np.testing.assert_array_equal(loaded.block_signal, prior.block_signal)


def test_the_committed_artifacts_name_classes_that_exist():
    """Every dataclass a pretrained artifact names imports (a module moved without its
    artifacts rewritten fails here, not at a user's first load)."""
    import wmrl_env.world_models.programs.ml_default as ml_default

    files = sorted(Path(ml_default.__file__).parent.joinpath("pretrained").glob("*.npz"))
    assert {path.name for path in files} >= {
        "ml_open_v4.npz",
        "ml_program_profile_v3.npz",
        "ml_program_task_v2.npz",
        "ml_status_v2.npz",
        "ml_status_v3.npz",
    }
    for path in files:
        assert read_state(path)
