"""The generated tasks: seeded, sized, and holding the structure they claim."""

from __future__ import annotations

import numpy as np
import pytest

from wmrl_env.envs.ml_tasks.headroom import (
    HEADROOM_FAMILIES,
    N_PRIVATE,
    N_PUBLIC,
    headroom_dataset,
    headroom_task,
)


@pytest.mark.parametrize("family", sorted(HEADROOM_FAMILIES))
def test_each_family_is_seeded_and_sized(family) -> None:
    a, b, c = (headroom_dataset(family, s) for s in (0, 0, 1))
    assert np.array_equal(a.X, b.X, equal_nan=True) and np.array_equal(a.y, b.y)
    assert not np.array_equal(a.X, c.X, equal_nan=True)
    task = headroom_task(f"hr_{family}_s0")
    assert len(task.private_positions) == N_PRIVATE
    assert len(task.y_train) + len(task.valid_positions) == N_PUBLIC
    assert task.description.isascii()


def test_missingness_is_informative_and_classes_imbalanced() -> None:
    data = headroom_dataset("missing", 0)
    assert abs(data.y.mean() - 0.15) < 0.01
    missing = np.isnan(data.X[:, 3])
    # P(missing | y=1) = 1 - 0.4 * 0.95, P(missing | y=0) = 1 - 0.85 * 0.95 (sd ~ 0.01)
    assert abs(missing[data.y == 1].mean() - 0.62) < 0.05
    assert abs(missing[data.y == 0].mean() - 0.19) < 0.03
    kurtosis = np.nanmean(data.X[:, 5] ** 4) / np.nanmean(data.X[:, 5] ** 2) ** 2
    assert kurtosis > 10  # t(2): heavy tails (a normal gives 3)


def test_the_categorical_has_150_unordered_levels() -> None:
    data = headroom_dataset("categories", 0)
    levels = np.unique(data.X[:, 0])
    assert len(levels) == 150
    means = np.array([data.y[data.X[:, 0] == level].mean() for level in levels])
    assert abs(np.corrcoef(levels, means)[0, 1]) < 0.2  # codes carry no order
    assert np.std(means) > 0.7  # but the levels carry signal


def test_periodic_classes_and_outliers() -> None:
    shares = np.bincount(headroom_dataset("periodic", 0).y) / (N_PUBLIC + N_PRIVATE)
    assert np.allclose(shares, [0.5, 0.25, 0.15, 0.10], atol=0.01)
    X = headroom_dataset("outliers", 0).X
    assert 0.005 < np.mean(np.abs(X) > 20) < 0.02


def test_bad_ids_are_refused() -> None:
    for bad in ("hr_nope_s0", "hr_missing", "missing_s0", "hr_missing_s-1"):
        with pytest.raises(ValueError, match="not a generated task id"):
            headroom_task(bad)
