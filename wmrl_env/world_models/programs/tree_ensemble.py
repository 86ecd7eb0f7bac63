"""A fitted histogram gradient-boosting regressor as plain arrays, predicting with NumPy alone.

:class:`TreeEnsemble` holds what scikit-learn's ``HistGradientBoostingRegressor`` predicts
with (the baseline and every tree's nodes) and predicts the same numbers, to the bit: the
same leaf (a missing value goes where the node sends missing values, otherwise
``x <= threshold`` goes left) and the same order of summation (the baseline, then each tree
in turn). A world model's boosters are kept in this form, so a saved world model loads under
any scikit-learn (or none) and no pickle is needed.

The leaves are found without walking the trees node by node (QuickScorer, Lucchese et al.
2015): every split of every tree is tested at once, each split that sends a row right rules
out the leaves of its left subtree (a bit mask per tree, at most 64 leaves), and the row's
leaf is the leftmost one left.

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
from functools import cached_property
from typing import Any

import numpy as np

__all__ = ["TreeEnsemble"]

_BLOCK = 64
"""Rows tested against every split together: their (split, row) arrays stay in the CPU's
cache."""
_MAX_LEAVES = 64


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
        leaves = np.empty((len(self.roots), len(rows)))
        for start in range(0, len(rows), _BLOCK):
            leaves[:, start : start + _BLOCK] = self._leaf_values(rows[start : start + _BLOCK])
        out = np.full(len(rows), self.baseline)
        for contribution in leaves:  # tree by tree, as scikit-learn sums
            out += contribution
        return out

    def _leaf_values(self, rows: np.ndarray) -> np.ndarray:
        """The value of the leaf each row reaches in each tree (trees, n)."""
        splits = self._splits
        columns = rows.T  # a column read where missing values go left has them at -inf
        both = np.concatenate([columns, np.where(np.isnan(columns), -np.inf, columns)])
        left = both.take(splits.column, axis=0) <= splits.threshold
        kept = left.astype(splits.kept.dtype)
        np.negative(kept, out=kept)  # every leaf kept where the split goes left
        np.bitwise_or(kept, splits.kept, out=kept)
        shape = (splits.depth, len(splits.offset), len(rows))
        reached = np.bitwise_and.reduce(kept.reshape(shape), axis=0)
        lowest = (reached & -reached).astype(np.float64)  # a power of two: exact
        leaf = np.frexp(lowest)[1] - 1
        return splits.leaf_value[leaf + splits.offset]

    @cached_property
    def _splits(self) -> _Splits:
        return _Splits.of(self)


@dataclass(frozen=True)
class _Splits:
    """An ensemble's splits as :meth:`TreeEnsemble._leaf_values` tests them: slot ``k`` of
    tree ``t`` at ``k * trees + t`` (trees with fewer splits padded), leaves numbered left to
    right within their tree.

    Args:
        column: the column of ``[rows, rows with NaN at -inf]`` the split reads (the second
            half where missing values go left).
        threshold: ``x <= threshold`` goes left (a column, to broadcast over rows).
        kept: the leaves a right turn leaves possible: all but the left subtree's (all for
            padding).
        depth: the slots per tree.
        leaf_value: each tree's leaf values, ``_MAX_LEAVES`` or fewer a tree.
        offset: where each tree's leaves start in ``leaf_value`` (a column).
    """

    column: np.ndarray
    threshold: np.ndarray
    kept: np.ndarray
    depth: int
    leaf_value: np.ndarray
    offset: np.ndarray

    @classmethod
    def of(cls, ensemble: TreeEnsemble) -> _Splits:
        trees = [_in_order(ensemble, int(root)) for root in ensemble.roots]
        width = max((len(leaves) for leaves, _ in trees), default=1)
        if width > _MAX_LEAVES:
            raise ValueError(f"trees of at most {_MAX_LEAVES} leaves predict, got {width}")
        if np.isnan(ensemble.threshold[~ensemble.is_leaf]).any():
            raise ValueError("inconsistent tree arrays: a split with a NaN threshold")
        mask = np.dtype(f"uint{max(8, 1 << (width - 1).bit_length())}")
        depth = max((len(splits) for _, splits in trees), default=1) or 1
        column = np.zeros((depth, len(trees)), dtype=np.int64)
        threshold = np.zeros((depth, len(trees)))
        kept = np.full((depth, len(trees)), np.iinfo(mask).max, dtype=mask)
        leaf_value = np.zeros((len(trees), width))
        for t, (leaves, splits) in enumerate(trees):
            leaf_value[t, : len(leaves)] = ensemble.value[leaves]
            for k, (node, first, right) in enumerate(splits):
                missing_left = ensemble.missing_left[node]
                column[k, t] = ensemble.feature[node] + ensemble.n_features * missing_left
                threshold[k, t] = ensemble.threshold[node]
                kept[k, t] &= ~np.array(((1 << (right - first)) - 1) << first, dtype=mask)
        return cls(column.ravel(), threshold.reshape(-1, 1), kept.reshape(-1, 1), depth,
                   leaf_value.ravel(), (np.arange(len(trees)) * width).reshape(-1, 1))  # fmt: skip


def _in_order(ensemble: TreeEnsemble, root: int) -> tuple[list[int], list[tuple[int, int, int]]]:
    """A tree's leaves left to right, and each split with the positions of its first leaf
    and of its right subtree's first leaf."""
    leaves: list[int] = []
    splits: list[tuple[int, int, int]] = []
    stack: list[tuple[int, int]] = [(root, -1)]  # (node, its first leaf once its left is done)
    while stack:
        node, first = stack.pop()
        if first >= 0:
            splits.append((node, first, len(leaves)))
            stack.append((int(ensemble.right[node]), -1))
        elif ensemble.is_leaf[node]:
            leaves.append(node)
        else:
            stack.append((node, len(leaves)))
            stack.append((int(ensemble.left[node]), -1))
    return leaves, splits
