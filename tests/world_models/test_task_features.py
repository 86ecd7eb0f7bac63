"""Task features: computed from the train file alone, cached, meaningful on known data."""

from __future__ import annotations

import io

import numpy as np
import pytest

from wmrl_env.envs.ml_tasks import get_task
from wmrl_env.envs.ml_tasks.features import (
    TASK_FEATURE_NAMES,
    feature,
    task_features,
    train_features,
)


def test_features_come_from_the_train_file_only():
    task = get_task("wine")
    table = np.genfromtxt(io.BytesIO(task.csv_files["train.csv"]), delimiter=",", skip_header=1)
    from_file = train_features(table[:, 1:-1], table[:, -1].astype(int), task.kind, task.metric)
    np.testing.assert_allclose(task_features(task), from_file, equal_nan=True)


def test_cached_copy_and_shape():
    task = get_task("iris")
    first = task_features(task)
    first[:] = -7.0  # a caller mutating its copy must not poison the cache
    again = task_features(task)
    assert again.shape == (len(TASK_FEATURE_NAMES),)
    assert feature(again, "kind_multiclass") == 1.0 and feature(again, "metric_accuracy") == 1.0
    assert feature(again, "log_classes") == pytest.approx(np.log10(3))


def test_missingness_skew_and_negative_columns():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    X[:, 1] = rng.lognormal(sigma=1.5, size=300)  # strongly right-skewed
    X[rng.random(300) < 0.25, 2] = np.nan
    y = X[:, 0] + rng.normal(scale=0.1, size=300)
    x = train_features(X, y, "regression", "r2")
    assert feature(x, "missing_share") == pytest.approx(np.isnan(X).mean())
    assert feature(x, "columns_with_missing_share") == 0.25
    assert feature(x, "max_abs_skew") > 2.0
    assert feature(x, "negative_columns_share") == pytest.approx(0.75)  # all but lognormal
    assert np.isnan(feature(x, "minority_share"))


def test_landmarks_tell_linear_from_local_structure():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(400, 10))
    linear = train_features(X, X @ rng.normal(size=10), "regression", "r2")
    assert feature(linear, "landmark_linear") > 0.95
    assert feature(linear, "landmark_linear_minus_1nn") > 0.2
    rings = (np.hypot(X[:, 0], X[:, 1]) > 1.2).astype(int)  # not linearly separable
    ring = train_features(X[:, :2], rings, "binary", "roc_auc")
    assert feature(ring, "landmark_1nn") > feature(ring, "landmark_linear") + 0.1


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="kind"):
        train_features(np.zeros((5, 2)), np.zeros(5), "ranking", "r2")
    with pytest.raises(ValueError, match="metric"):
        train_features(np.zeros((5, 2)), np.zeros(5), "regression", "mae")
    with pytest.raises(ValueError, match="2-D"):
        train_features(np.zeros(5), np.zeros(5), "regression", "r2")
