"""Every dataset loads offline from an installed package; synthetic families are seeded."""

from __future__ import annotations

import socket

import numpy as np
import pytest

from wmrl_env.envs.ml_tasks.datasets import DATASET_LOADERS, load_dataset
from wmrl_env.envs.ml_tasks.synthetic import SYNTHETIC_FAMILIES, synthetic_dataset


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("network access attempted while loading a bundled dataset")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.mark.parametrize("name", sorted(DATASET_LOADERS))
def test_real_dataset_loads_offline_and_is_consistent(name, no_network) -> None:
    data = load_dataset(name)
    assert data.X.dtype == np.float64 and data.X.shape[0] == len(data.y) >= 150
    assert len(set(data.feature_names)) == data.X.shape[1]
    assert all(n.replace("_", "").isalnum() and n.isascii() for n in data.feature_names)
    if data.kind == "regression":
        assert np.isfinite(data.y).all() and len(np.unique(data.y)) > 10
    else:
        classes = np.unique(data.y)
        assert data.y.dtype.kind == "i" and len(classes) >= 2
        assert len(classes) == 2 if data.kind == "binary" else len(classes) > 2
    if name != "fertility":  # the one dataset with real missing values
        assert not np.isnan(data.X).any()


def test_fertility_keeps_its_real_missing_values() -> None:
    assert np.isnan(load_dataset("fertility").X).any()


def test_unknown_dataset() -> None:
    with pytest.raises(ValueError, match="unknown dataset 'mnist'"):
        load_dataset("mnist")


@pytest.mark.parametrize("family", sorted(SYNTHETIC_FAMILIES))
def test_synthetic_family_is_seeded(family) -> None:
    a, b, c = (synthetic_dataset(family, s) for s in (4, 4, 5))
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_array_equal(a.y, b.y)
    assert not np.array_equal(a.X, c.X)


def test_synthetic_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="unknown synthetic family"):
        synthetic_dataset("spirals", 0)
    with pytest.raises(ValueError, match="non-negative int"):
        synthetic_dataset("moons", -1)
