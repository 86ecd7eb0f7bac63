"""A fitted histogram gradient-boosting classifier as plain arrays, predicting with NumPy (and
SciPy's ``expit``) alone.

:class:`TreeClassifier` holds one
:class:`~wmrl_env.world_models.programs.tree_ensemble.TreeEnsemble` per raw score of
scikit-learn's ``HistGradientBoostingClassifier`` (one for two classes, one per class
otherwise) and turns the raw scores into probabilities as scikit-learn does: the
sigmoid of the one score for two classes, the softmax of the scores otherwise (the same
operations in the same order, so the same numbers). A status model's classifier is kept in
this form, so it loads under any scikit-learn (or none) and no pickle is needed.

Example:
    >>> from sklearn.ensemble import HistGradientBoostingClassifier
    >>> rows = np.random.default_rng(0).normal(size=(300, 3))
    >>> rows[::7, 1] = np.nan
    >>> labels = np.where(rows[:, 0] > 0.5, "high", np.where(rows[:, 0] < -0.5, "low", "mid"))
    >>> fitted = HistGradientBoostingClassifier(max_iter=20).fit(rows, labels)
    >>> classifier = TreeClassifier.from_sklearn(fitted)
    >>> classifier.classes
    ('high', 'low', 'mid')
    >>> bool((classifier.predict_proba(rows) == fitted.predict_proba(rows)).all())
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from wmrl_env.world_models.programs.tree_ensemble import TreeEnsemble

__all__ = ["TreeClassifier"]


@dataclass(frozen=True, eq=False)
class TreeClassifier:
    """Class probabilities from boosted raw scores.

    Args:
        classes: the class labels, in the order of ``predict_proba``'s columns.
        scores: the raw scores' trees: one ensemble (the log-odds of ``classes[1]``) for two
            classes, one per class otherwise.
    """

    classes: tuple[str, ...]
    scores: tuple[TreeEnsemble, ...]

    def __post_init__(self) -> None:
        classes = tuple(str(label) for label in self.classes)
        scores = tuple(self.scores)
        expected = 1 if len(classes) == 2 else len(classes)
        if (
            len(classes) < 2
            or len(set(classes)) != len(classes)
            or len(scores) != expected
            or not all(isinstance(score, TreeEnsemble) for score in scores)
            or len({score.n_features for score in scores}) != 1
        ):
            raise ValueError(
                f"inconsistent classifier: {len(classes)} distinct classes need {expected} "
                f"tree ensembles of one width, got {len(scores)}"
            )
        object.__setattr__(self, "classes", classes)
        object.__setattr__(self, "scores", scores)

    @property
    def n_features(self) -> int:
        return self.scores[0].n_features

    @classmethod
    def from_sklearn(cls, classifier: Any) -> TreeClassifier:
        """The trees of a fitted ``HistGradientBoostingClassifier`` (numeric splits only)."""
        return cls(
            classes=tuple(str(label) for label in classifier.classes_),
            scores=tuple(
                TreeEnsemble.from_sklearn(classifier, output=k)
                for k in range(classifier.n_trees_per_iteration_)
            ),
        )

    def raw_scores(self, rows: np.ndarray) -> np.ndarray:
        """The raw scores (n, len(scores)) of ``rows`` (n, n_features); NaN allowed."""
        raw = np.empty((len(np.asarray(rows)), len(self.scores)), order="F")
        for k, score in enumerate(self.scores):
            raw[:, k] = score.predict(rows)
        return raw

    def predict_proba(self, rows: np.ndarray) -> np.ndarray:
        """The class probabilities (n, len(classes)) of ``rows``, as scikit-learn computes
        them from the raw scores."""
        from scipy.special import expit

        raw = self.raw_scores(rows)
        if len(self.classes) == 2:
            proba = np.empty((len(raw), 2))
            proba[:, 1] = expit(raw[:, 0])
            proba[:, 0] = 1 - proba[:, 1]
            return proba
        raw -= np.max(raw, axis=1).reshape((-1, 1))
        np.exp(raw, out=raw)
        raw /= np.sum(raw, axis=1).reshape((-1, 1))
        return raw
