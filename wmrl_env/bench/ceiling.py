"""The cross-task regime's supervised ceiling: how well task features alone pick a program.

A task-conditioned policy trained on the ``train`` split can at best learn the map from task
features to the best program. :func:`supervised_ceiling` fits that map directly, with every
program's real score on every train task known (the full train table, more than any arm
ever executes): a regression from the features to all 72 scores, ridge or k nearest
neighbours, its kind and strength chosen by cross-validation over the train tasks on the
score of the program it picks. Its pick's score on the held-out tasks is the line: an arm
that ends near it has used what the features tell; one far above it would be suspicious.

Example:
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(120, 2))
    >>> truth = lambda x: np.stack([x[:, 0], -x[:, 0], 0.1 * np.ones(len(x))], axis=1)
    >>> fit = supervised_ceiling(x[:80], truth(x[:80]), x[80:], truth(x[80:]))
    >>> oracle = truth(x[80:]).max(axis=1).mean()
    >>> fit.model.startswith("ridge"), round(float(fit.scores.mean() - oracle), 3)
    (True, 0.0)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from wmrl_env.bench.bank import greedy_scores

CEILING_LINE = "supervised ceiling: task features -> 72 scores, fitted on the full train table"
"""the name of the line in the cross-task report"""
RIDGE_ALPHAS: tuple[float, ...] = (0.01, 0.1, 1.0, 10.0, 100.0, 1e3, 1e4, 1e6)
"""ridge strengths tried (1e6: as good as the best constant program)"""
NEIGHBOURS: tuple[int, ...] = (1, 3, 5, 10, 20)
"""k of the nearest-neighbour fits tried"""


def ridge_predict(
    x_train: np.ndarray, y_train: np.ndarray, x: np.ndarray, alpha: float
) -> np.ndarray:
    """Ridge regression of every column of ``y_train`` on ``x_train`` (intercept not
    penalised), predicted at ``x``."""
    mean_x, mean_y = x_train.mean(axis=0), y_train.mean(axis=0)
    centred = x_train - mean_x
    gram = centred.T @ centred + alpha * np.eye(x_train.shape[1])
    weights = np.linalg.solve(gram, centred.T @ (y_train - mean_y))
    return (x - mean_x) @ weights + mean_y


def knn_predict(x_train: np.ndarray, y_train: np.ndarray, x: np.ndarray, k: int) -> np.ndarray:
    """The mean of the ``k`` nearest train rows' targets (Euclidean distance)."""
    distances = ((x[:, None, :] - x_train[None, :, :]) ** 2).sum(axis=2)
    nearest = np.argsort(distances, axis=1, kind="stable")[:, : min(k, len(x_train))]
    return y_train[nearest].mean(axis=1)


def _candidates() -> list[tuple[str, object]]:
    ridge = [
        (f"ridge alpha={a:g}", lambda xt, yt, x, a=a: ridge_predict(xt, yt, x, a))
        for a in RIDGE_ALPHAS
    ]
    knn = [(f"k-NN k={k}", lambda xt, yt, x, k=k: knn_predict(xt, yt, x, k)) for k in NEIGHBOURS]
    return ridge + knn


@dataclass(frozen=True)
class CeilingFit:
    """The chosen fit, its cross-validated pick score on train and its held-out pick scores
    (one per held-out task, ties broken at random)."""

    model: str
    cv_score: float
    scores: np.ndarray
    cv_scores: dict[str, float]


def supervised_ceiling(
    train_features: np.ndarray,
    train_scores: np.ndarray,
    heldout_features: np.ndarray,
    heldout_scores: np.ndarray,
    folds: int = 5,
    seed: int = 0,
    candidates: Sequence[tuple[str, object]] | None = None,
) -> CeilingFit:
    """Choose the fit (ridge / k-NN and its strength) with the best ``folds``-fold
    cross-validated pick score on the train tasks, refit it on all of them, and score its
    pick on every held-out task.

    Args:
        train_features, train_scores: ``(T, F)`` and ``(T, P)`` of the train tasks.
        heldout_features, heldout_scores: the same for the held-out tasks (the scores only
            grade the picks).
    """
    x, y = np.asarray(train_features, float), np.asarray(train_scores, float)
    xh, yh = np.asarray(heldout_features, float), np.asarray(heldout_scores, float)
    if x.ndim != 2 or y.ndim != 2 or len(x) != len(y) or xh.shape[1] != x.shape[1]:
        raise ValueError(f"features {x.shape} / {xh.shape} do not fit scores {y.shape}")
    if yh.shape != (len(xh), y.shape[1]):
        raise ValueError(f"held-out scores {yh.shape}, expected {(len(xh), y.shape[1])}")
    if not 2 <= folds <= len(x):
        raise ValueError(f"folds must be in 2..{len(x)}, got {folds}")
    if not (np.isfinite(x).all() and np.isfinite(y).all() and np.isfinite(xh).all()):
        raise ValueError("features and scores must be finite")
    order = np.random.default_rng(seed).permutation(len(x))
    parts = np.array_split(order, folds)
    cv = {}
    for name, predict in candidates or _candidates():
        picked = []
        for part in parts:
            rest = np.setdiff1d(order, part)
            picked.append(greedy_scores(predict(x[rest], y[rest], x[part]), y[part]))
        cv[name] = float(np.concatenate(picked).mean())
    best = max(cv, key=cv.get)
    predict = dict(candidates or _candidates())[best]
    return CeilingFit(best, cv[best], greedy_scores(predict(x, y, xh), yh), cv)
