"""Regression heads and the error model on numeric features with known, uneven noise."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pytest
from scipy.stats import spearmanr
from sklearn.base import BaseEstimator, RegressorMixin

from wmrl_env.world_models.embeddings.heads import (
    HEADS,
    ErrorModel,
    cross_fitted_predictions,
    fit_head,
    make_head,
)


def data(n: int, seed: int):
    """Two clusters (as embeddings of two kinds of artifact): y = sin(2 x0) + x1 with noise
    sd 0.05 in the first cluster and 0.5 in the second."""
    rng = np.random.default_rng(seed)
    noisy = rng.random(n) < 0.5
    X = rng.normal(size=(n, 8))
    X[:, 2] += 6.0 * noisy
    noise = np.where(noisy, 0.5, 0.05)
    y = np.sin(2 * X[:, 0]) + X[:, 1] + noise * rng.normal(size=n)
    return X, y, noise


@pytest.mark.parametrize("name", HEADS)
def test_each_head_ranks_held_out_points(name) -> None:
    X, y, _ = data(400, seed=0)
    X_test, y_test, _ = data(200, seed=1)
    head = fit_head(make_head(name, seed=0), X, y)
    # Spearman's sd under no signal is 1/sqrt(199) = 0.07; the bar is > 7 sd
    assert spearmanr(head.predict(X_test), y_test).statistic > 0.5


def test_error_model_std_follows_the_noise_and_is_calibrated() -> None:
    X, y, _ = data(600, seed=2)
    y = y - np.sin(2 * X[:, 0])  # linear, so ridge's residual is the noise alone
    template = make_head("ridge", seed=0)
    oof = cross_fitted_predictions(template, X, y, n_folds=5, seed=0)
    errors = ErrorModel().fit(X, y - oof)
    head = fit_head(template, X, y)
    X_test, y_test, noise = data(400, seed=3)
    y_test = y_test - np.sin(2 * X_test[:, 0])
    std = errors.predict(X_test)
    residual = y_test - head.predict(X_test)
    assert std[noise > 0.1].mean() > 2 * std[noise < 0.1].mean()
    assert spearmanr(std, np.abs(residual)).statistic > 0.3
    # calibrated on average: mean predicted variance within 30 % of the mean squared error
    assert 0.7 < np.mean(std**2) / np.mean(residual**2) < 1.3


class GroupRecorder(RegressorMixin, BaseEstimator):
    """Predicts 0 and records which groups (column 0) each fit saw."""

    seen: ClassVar[list[set]] = []

    def fit(self, X, y):
        GroupRecorder.seen.append(set(X[:, 0].tolist()))
        return self

    def predict(self, X):
        return np.zeros(X.shape[0])


def test_grouped_cross_fitting_never_sees_the_group() -> None:
    groups = np.repeat(np.arange(6), 10)
    X = np.column_stack([groups, np.zeros(60)]).astype(float)
    GroupRecorder.seen = []
    cross_fitted_predictions(GroupRecorder(), X, np.zeros(60), groups=list(groups), n_folds=3)
    assert len(GroupRecorder.seen) == 3
    for seen in GroupRecorder.seen:
        assert len(seen) == 4  # each fold trains on the other 2/3 of the groups, whole
    held_out = [set(range(6)) - seen for seen in GroupRecorder.seen]
    assert set().union(*held_out) == set(range(6))


def test_unknown_head_raises() -> None:
    with pytest.raises(ValueError, match="unknown head"):
        make_head("forest")
