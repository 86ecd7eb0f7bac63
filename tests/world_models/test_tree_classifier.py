"""TreeClassifier: scikit-learn's boosted classifiers as arrays, giving the same probabilities."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.ensemble import HistGradientBoostingClassifier

from wmrl_env.world_models.programs.tree_classifier import TreeClassifier


def rows_with_gaps(n: int, seed: int) -> np.ndarray:
    rows = np.random.default_rng(seed).normal(size=(n, 5))
    rows[np.random.default_rng(seed + 1).random(rows.shape) < 0.15] = np.nan
    return rows


def labels_of(rows: np.ndarray, n_classes: int, seed: int) -> np.ndarray:
    signal = np.nan_to_num(rows[:, 0]) + 0.5 * np.nan_to_num(rows[:, 1]) ** 2
    noisy = signal + np.random.default_rng(seed).normal(scale=0.5, size=len(rows))
    edges = np.quantile(noisy, np.linspace(0, 1, n_classes + 1)[1:-1])
    return np.array([f"class{k}" for k in np.searchsorted(edges, noisy)])


@pytest.mark.parametrize("n_classes", [2, 3, 9])  # sigmoid; softmax; softmax summing 9 columns
def test_the_probabilities_are_scikit_learns_to_the_bit(n_classes):
    rows = rows_with_gaps(600, 0)
    fitted = HistGradientBoostingClassifier(max_iter=25, random_state=0).fit(
        rows, labels_of(rows, n_classes, 0)
    )
    classifier = TreeClassifier.from_sklearn(fitted)
    assert classifier.classes == tuple(fitted.classes_)
    assert len(classifier.scores) == (1 if n_classes == 2 else n_classes)
    unseen = rows_with_gaps(300, 7) * 3  # other rows, values beyond the training range
    for batch in (rows, unseen, unseen[:1]):
        np.testing.assert_array_equal(classifier.predict_proba(batch), fitted.predict_proba(batch))
        np.testing.assert_array_equal(classifier.raw_scores(batch), fitted._raw_predict(batch))
    assert classifier.predict_proba(unseen[:0]).shape == (0, n_classes)


def test_an_inconsistent_classifier_is_refused():
    rows = rows_with_gaps(200, 0)
    fitted = HistGradientBoostingClassifier(max_iter=5).fit(rows, labels_of(rows, 3, 0))
    classifier = TreeClassifier.from_sklearn(fitted)
    with pytest.raises(ValueError, match="3 distinct classes need 3 tree ensembles"):
        TreeClassifier(classifier.classes, classifier.scores[:2])
    with pytest.raises(ValueError, match="inconsistent classifier"):
        TreeClassifier(("a", "a", "b"), classifier.scores)
    with pytest.raises(ValueError, match="inconsistent classifier"):
        TreeClassifier(("a",), classifier.scores[:1])
    with pytest.raises(ValueError, match=r"rows must be \(n, 5\)"):
        classifier.predict_proba(rows[:, :4])
