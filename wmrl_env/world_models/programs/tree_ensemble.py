"""A fitted histogram gradient-boosting regressor as plain arrays, predicting with NumPy alone.

:class:`TreeEnsemble` holds what scikit-learn's ``HistGradientBoostingRegressor`` predicts
with (the baseline and every tree's nodes) and predicts the same numbers, to the bit: the
same traversal (a missing value goes where the node sends missing values, otherwise
``x <= threshold`` goes left) and the same order of summation (the baseline, then each tree
in turn). A world model's boosters are kept in this form, so a saved world model loads under
any scikit-learn (or none) and no pickle is needed.

Example:
    >>> from sklearn.ensemble import HistGradientBoostingRegressor
    >>> rows = np.random.default_rng(0).normal(size=(200, 3))
    >>> rows[::7, 1] = np.nan
    >>> fitted = HistGradientBoostingRegressor(max_iter=20).fit(rows, rows[:, 0])
    >>> ensemble = TreeEnsemble.from_sklearn(fitted)
    >>> bool((ensemble.predict(rows) == fitted.predict(rows)).all())
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["TreeEnsemble"]

_BLOCK = 128
"""Rows walked down the trees together: their (row, tree) pairs' arrays stay in the CPU's
cache (a block of 128 rows predicted twice as fast per row as 4,096 at once)."""


@dataclass(frozen=True, eq=False)
class TreeEnsemble:
    """Regression trees summed onto a baseline. The nodes of all trees are concatenated;
    ``roots`` are the trees' first nodes, ``left`` / ``right`` absolute node indices.

    Args:
        baseline: the prediction before any tree.
        roots: index of each tree's root node (int64, one per tree, in summation order).
        feature: the column a split node reads (int64; 0 at leaves).
        threshold: ``x <= threshold`` goes left (float64).
        missing_left: a missing (NaN) value goes left (bool).
        left, right: the children of a split node (int64; the node itself at leaves).
        value: a leaf's contribution (float64).
        is_leaf: whether a node is a leaf (bool).
        n_features: the number of columns ``predict`` takes.
    """

    baseline: float
    roots: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray
    missing_left: np.ndarray
    left: np.ndarray
    right: np.ndarray
    value: np.ndarray
    is_leaf: np.ndarray
    n_features: int

    def __post_init__(self) -> None:
        arrays = {
            "roots": np.asarray(self.roots, dtype=np.int64),
            "feature": np.asarray(self.feature, dtype=np.int64),
            "threshold": np.asarray(self.threshold, dtype=np.float64),
            "missing_left": np.asarray(self.missing_left, dtype=bool),
            "left": np.asarray(self.left, dtype=np.int64),
            "right": np.asarray(self.right, dtype=np.int64),
            "value": np.asarray(self.value, dtype=np.float64),
            "is_leaf": np.asarray(self.is_leaf, dtype=bool),
        }
        nodes = len(arrays["value"])
        shapes = {name: a.shape for name, a in arrays.items() if name != "roots"}
        indices = np.concatenate([arrays["roots"], arrays["left"], arrays["right"]])
        if (
            set(shapes.values()) != {(nodes,)}
            or arrays["roots"].ndim != 1
            or (len(indices) and (indices.min() < 0 or indices.max() >= nodes))
            or (arrays["feature"] < 0).any()
            or (arrays["feature"] >= self.n_features).any()
        ):
            raise ValueError(
                f"inconsistent tree arrays: {shapes}, {len(arrays['roots'])} roots, "
                f"{self.n_features} features"
            )
        for name, array in arrays.items():
            object.__setattr__(self, name, array)
        object.__setattr__(self, "baseline", float(self.baseline))
        object.__setattr__(self, "n_features", int(self.n_features))

    @classmethod
    def from_sklearn(cls, booster: Any, output: int | None = None) -> TreeEnsemble:
        """The trees of a fitted ``HistGradientBoostingRegressor`` (numeric splits only; one
        tree per iteration, as for every regression loss), or those of raw score ``output``
        of a booster with several trees per iteration (a multiclass classifier's class)."""
        if output is None:
            if any(len(predictors) != 1 for predictors in booster._predictors):
                raise ValueError("only single-output regressors convert to a TreeEnsemble")
            output = 0
        trees = [predictors[output] for predictors in booster._predictors]
        nodes = [tree.nodes for tree in trees]
        if not nodes or any(n["is_categorical"].any() for n in nodes):
            raise ValueError("a fitted booster with numeric splits only converts to a TreeEnsemble")
        sizes = np.array([len(n) for n in nodes], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        every = np.concatenate(nodes)
        shift = np.repeat(offsets, sizes)
        leaf = every["is_leaf"].astype(bool)
        here = np.arange(len(every), dtype=np.int64)
        return cls(
            baseline=float(np.asarray(booster._baseline_prediction).ravel()[output]),
            roots=offsets,
            feature=np.where(leaf, 0, every["feature_idx"]),
            threshold=every["num_threshold"],
            missing_left=every["missing_go_to_left"],
            left=np.where(leaf, here, every["left"].astype(np.int64) + shift),
            right=np.where(leaf, here, every["right"].astype(np.int64) + shift),
            value=every["value"],
            is_leaf=leaf,
            n_features=int(booster.n_features_in_),
        )

    def predict(self, rows: np.ndarray) -> np.ndarray:
        """The ensemble's prediction for each row of ``rows`` (n, n_features); NaN allowed."""
        rows = np.asarray(rows, dtype=np.float64)
        if rows.ndim != 2 or rows.shape[1] != self.n_features:
            raise ValueError(f"rows must be (n, {self.n_features}), got shape {rows.shape}")
        out = np.empty(len(rows))
        for start in range(0, len(rows), _BLOCK):  # a block's (row, tree) pairs stay in cache
            out[start : start + _BLOCK] = self._predict_block(rows[start : start + _BLOCK])
        return out

    def _predict_block(self, rows: np.ndarray) -> np.ndarray:
        n, trees = len(rows), len(self.roots)
        flat = rows.ravel()
        node = np.tile(self.roots, n)  # (row, tree) pairs, row-major
        row_start = np.repeat(np.arange(n, dtype=np.int64) * self.n_features, trees)
        active = np.flatnonzero(~self.is_leaf[node])  # the pairs not yet at a leaf
        while len(active):
            at = node[active]
            x = flat[row_start[active] + self.feature[at]]
            go_left = np.where(np.isnan(x), self.missing_left[at], x <= self.threshold[at])
            at = np.where(go_left, self.left[at], self.right[at])
            node[active] = at
            active = active[~self.is_leaf[at]]
        out = np.full(n, self.baseline)
        for contribution in self.value[node].reshape(n, trees).T:  # as scikit-learn sums
            out += contribution
        return out
