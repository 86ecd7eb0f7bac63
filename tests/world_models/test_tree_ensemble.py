"""TreeEnsemble: scikit-learn's boosters as arrays, predicting the same numbers to the bit."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.ensemble import HistGradientBoostingRegressor

from wmrl_env.world_models.programs.pretraining import fit_booster
from wmrl_env.world_models.programs.tree_ensemble import TreeEnsemble


def rows_with_gaps(n: int, seed: int) -> np.ndarray:
    rows = np.random.default_rng(seed).normal(size=(n, 6))
    rows[np.random.default_rng(seed + 1).random(rows.shape) < 0.15] = np.nan
    rows[:, 5] = np.nan  # a column never seen (fit_booster zeroes it for the fit)
    return rows


@pytest.mark.parametrize("spread", [False, True])
def test_fit_booster_predicts_what_scikit_learn_predicts(spread, monkeypatch):
    fitted = []  # the scikit-learn booster fit_booster converts
    convert = TreeEnsemble.from_sklearn
    monkeypatch.setattr(
        TreeEnsemble, "from_sklearn", lambda booster: fitted.append(booster) or convert(booster)
    )
    rows = rows_with_gaps(400, 0)
    target = np.nan_to_num(rows[:, 0]) + 0.5 * np.nan_to_num(rows[:, 1]) ** 2
    ensemble = fit_booster(rows, target, seed=3, spread=spread)
    (booster,) = fitted
    assert isinstance(booster, HistGradientBoostingRegressor)
    unseen = rows_with_gaps(300, 7) * 3  # other rows, values beyond the training range
    for batch in (rows, unseen, unseen[:1]):
        np.testing.assert_array_equal(ensemble.predict(batch), booster.predict(batch))
    assert ensemble.predict(unseen[:0]).shape == (0,)
    assert len(ensemble.roots) == booster.n_iter_ > 10


def test_bad_rows_or_arrays_are_refused():
    rows = rows_with_gaps(100, 0)
    ensemble = fit_booster(rows, np.nan_to_num(rows[:, 0]), seed=0)
    with pytest.raises(ValueError, match=r"rows must be \(n, 6\)"):
        ensemble.predict(rows[:, :5])
    with pytest.raises(ValueError, match="inconsistent tree arrays"):
        TreeEnsemble(**{**vars(ensemble), "left": ensemble.left[:-1]})
    with pytest.raises(ValueError, match="inconsistent tree arrays"):
        TreeEnsemble(**{**vars(ensemble), "n_features": 2})


@pytest.mark.parametrize("leaves", [3, 9, 31, 64])
def test_trees_of_up_to_64_leaves_predict_what_scikit_learn_predicts(leaves):
    rows = rows_with_gaps(3_000, 2)[:, :5]  # every column seen
    target = np.nan_to_num(rows[:, 0]) * np.nan_to_num(rows[:, 2]) + np.isnan(rows[:, 3])
    booster = HistGradientBoostingRegressor(
        max_iter=30, max_leaf_nodes=leaves, min_samples_leaf=1, random_state=0
    ).fit(rows, target)
    ensemble = TreeEnsemble.from_sklearn(booster)
    unseen = rows_with_gaps(500, 9)[:, :5] * 4
    unseen[::11, 1] = np.inf
    unseen[::13, 2] = -np.inf
    for batch in (unseen, unseen[:1], unseen[:65]):
        np.testing.assert_array_equal(ensemble.predict(batch), booster.predict(batch))


def test_trees_of_more_than_64_leaves_are_refused():
    rows = rows_with_gaps(3_000, 3)[:, :5]
    booster = HistGradientBoostingRegressor(
        max_iter=2, max_leaf_nodes=80, min_samples_leaf=1, random_state=0
    ).fit(rows, np.nan_to_num(rows[:, 0]))
    with pytest.raises(ValueError, match="at most 64 leaves"):
        TreeEnsemble.from_sklearn(booster).predict(rows[:3])
