"""Regression heads on embeddings, and a per-prediction error model for their uncertainty.

Heads (scikit-learn estimators, cheap to refit online):

* ``"ridge"``: ridge regression, the penalty chosen by efficient leave-one-out CV.
* ``"kernel_ridge"``: RBF kernel ridge through a Nyström feature map (512 components), so
  memory stays linear in the number of pairs.
* ``"knn"``: distance-weighted k nearest neighbours.
* ``"gbm"``: histogram gradient boosting (100 rounds, 30 % of the features per split).
* ``"mlp"``: a one-hidden-layer perceptron with early stopping.

Uncertainty is the same for every head (:class:`ErrorModel`): the head is cross-fitted
(k folds grouped by context, so a residual is measured on contexts the fold did not see), a
k-NN regressor learns the absolute out-of-fold residual from the features, and one scale
factor makes the standard deviations calibrated on average (mean predicted variance equals
the mean squared out-of-fold residual).

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 4)); y = X[:, 0] + 0.1 * rng.normal(size=200)
    >>> head = make_head("ridge", seed=0).fit(X, y)
    >>> float(np.corrcoef(head.predict(X), y)[0, 1]) > 0.95
    True
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sklearn.base import RegressorMixin, clone
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.kernel_approximation import Nystroem
from sklearn.linear_model import RidgeCV
from sklearn.model_selection import GroupKFold, KFold
from sklearn.neighbors import KNeighborsRegressor
from sklearn.neural_network import MLPRegressor
from sklearn.pipeline import make_pipeline

__all__ = ["HEADS", "ErrorModel", "cross_fitted_predictions", "make_head"]

HEADS: tuple[str, ...] = ("ridge", "kernel_ridge", "knn", "gbm", "mlp")

_ALPHAS = np.logspace(-3, 3, 13)


def make_head(name: str, seed: int = 0) -> RegressorMixin:
    """A fresh, unfitted head called ``name`` (one of :data:`HEADS`)."""
    if name == "ridge":
        return RidgeCV(alphas=_ALPHAS)
    if name == "kernel_ridge":
        return make_pipeline(
            Nystroem(kernel="rbf", n_components=512, random_state=seed), RidgeCV(alphas=_ALPHAS)
        )
    if name == "knn":
        return KNeighborsRegressor(n_neighbors=15, weights="distance")
    if name == "gbm":
        return HistGradientBoostingRegressor(
            max_iter=100,
            learning_rate=0.1,
            max_features=0.3,
            early_stopping=True,
            random_state=seed,
        )
    if name == "mlp":
        return MLPRegressor(
            hidden_layer_sizes=(128,),
            alpha=1e-3,
            early_stopping=True,
            max_iter=200,
            random_state=seed,
        )
    raise ValueError(f"unknown head {name!r}; choose one of {HEADS}")


def fit_head(head: RegressorMixin, X: np.ndarray, y: np.ndarray) -> RegressorMixin:
    """Fit a clone of ``head``, shrinking k for k-NN and the Nyström map on few pairs."""
    head = clone(head)
    n = X.shape[0]
    if isinstance(head, KNeighborsRegressor):
        head.set_params(n_neighbors=min(head.n_neighbors, n))
    elif hasattr(head, "named_steps") and "nystroem" in head.named_steps:
        nystroem = head.named_steps["nystroem"]
        head.set_params(nystroem__n_components=min(nystroem.n_components, n))
    if isinstance(head, HistGradientBoostingRegressor | MLPRegressor) and n < 50:
        head.set_params(early_stopping=False)  # a validation split of a handful of pairs is noise
    return head.fit(X, y)


def _folds(n: int, groups: Sequence[object] | None, n_folds: int, seed: int):
    if groups is not None and len(set(groups)) >= n_folds:
        return GroupKFold(n_splits=n_folds).split(np.zeros(n), groups=list(groups))
    return KFold(n_splits=min(n_folds, n), shuffle=True, random_state=seed).split(np.zeros(n))


def cross_fitted_predictions(
    head: RegressorMixin,
    X: np.ndarray,
    y: np.ndarray,
    groups: Sequence[object] | None = None,
    n_folds: int = 5,
    seed: int = 0,
) -> np.ndarray:
    """Out-of-fold predictions: each pair predicted by a head fitted without its fold.

    Folds are grouped (``GroupKFold``) when ``groups`` has at least ``n_folds`` distinct values,
    so that a pair's context is unseen by the head that predicts it.
    """
    out = np.empty(X.shape[0])
    for train, test in _folds(X.shape[0], groups, n_folds, seed):
        out[test] = fit_head(head, X[train], y[train]).predict(X[test])
    return out


class ErrorModel:
    """Predicts the standard deviation of a head's error at a point, from out-of-fold residuals.

    A distance-weighted k-NN regressor of ``|residual|`` in feature space, turned into a
    standard deviation by the Gaussian relation ``E|e| = sigma * sqrt(2/pi)`` and then scaled so
    that the mean predicted variance equals the mean squared out-of-fold residual.
    """

    def __init__(self, n_neighbors: int = 25, floor: float = 1e-6) -> None:
        self.n_neighbors = n_neighbors
        self.floor = floor
        self._knn: KNeighborsRegressor | None = None
        self._scale = 1.0

    def fit(self, X: np.ndarray, residuals: np.ndarray) -> ErrorModel:
        residuals = np.abs(np.asarray(residuals, dtype=np.float64))
        k = max(1, min(self.n_neighbors, X.shape[0] - 1))
        self._knn = KNeighborsRegressor(n_neighbors=k).fit(X, residuals)
        self._scale = 1.0
        # leave-one-out estimates, so a pair's own residual does not shrink its std
        _, index = self._knn.kneighbors(X, n_neighbors=min(k + 1, X.shape[0]))
        loo = residuals[index[:, 1:]].mean(axis=1) if index.shape[1] > 1 else residuals
        raw = np.maximum(loo * np.sqrt(np.pi / 2.0), self.floor)
        self._scale = float(np.sqrt(np.mean(residuals**2) / np.mean(raw**2))) or 1.0
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        if self._knn is None:
            raise RuntimeError("ErrorModel.fit must be called before predict")
        raw = self._knn.predict(X) * np.sqrt(np.pi / 2.0)
        return np.maximum(raw * self._scale, self.floor)
