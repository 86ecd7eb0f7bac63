"""The .npz state file: what it stores comes back equal; what it cannot store is refused."""

from __future__ import annotations

import numpy as np
import pytest

from wmrl_env.world_models.artifact_file import read_state, write_state
from wmrl_env.world_models.task_residual import ResidualPrior


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
