"""Monotone calibration maps and the fits behind them; rank correlation with ties.

:class:`CalibrationMap` is what :class:`~wmrl_env.fusion.calibration.OnlineCalibrator` fits
each step: an isotonic (:func:`fit_isotonic_sorted`) or affine (:func:`fit_affine`) map of
world-model scores to real ones, with a tiny monotone tie-break (:class:`TieBreak`).
:func:`spearman` is the rank correlation its guards read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import isotonic_regression


@dataclass(frozen=True)
class CalibrationMap:
    """A monotone map ``s -> f(s)``: piecewise linear through knots, constant beyond them.

    ``kind`` is ``"isotonic"``, ``"affine"`` or ``"identity"`` (no knots).

    >>> m = CalibrationMap("affine", np.array([0.0, 1.0]), np.array([0.0, 2.0]))
    >>> m(np.array([-1.0, 0.5, 3.0])).tolist()
    [0.0, 1.0, 2.0]
    """

    kind: str
    knots_x: np.ndarray | None = None
    knots_y: np.ndarray | None = None
    tie_scale: float = 0.0  # multiplies the standardised score: the monotone tie-break
    s_mean: float = 0.0
    s_std: float = 1.0

    def __call__(self, scores: np.ndarray) -> np.ndarray:
        scores = np.asarray(scores, dtype=np.float64)
        if self.kind == "identity":
            return scores.copy()
        mapped = np.interp(scores, self.knots_x, self.knots_y)
        if self.tie_scale:
            mapped = mapped + self.tie_scale * (scores - self.s_mean) / self.s_std
        return mapped

    def state_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> CalibrationMap:
        return cls(**state)


IDENTITY = CalibrationMap("identity")


@dataclass(frozen=True)
class TieBreak:
    """The monotone tie-break ``scale * (s - mean) / std`` shared by a fit and its folds."""

    scale: float
    mean: float
    std: float

    @classmethod
    def for_data(cls, s: np.ndarray, r: np.ndarray, relative_size: float) -> TieBreak:
        span = float(r.max() - r.min()) or 1.0
        return cls(relative_size * span, float(s.mean()), float(s.std()) or 1.0)


def run_starts(ordered: np.ndarray) -> np.ndarray:
    """Indices where a run of equal values begins in a sorted array.

    >>> run_starts(np.array([1.0, 1.0, 2.0, 3.0, 3.0])).tolist()
    [0, 2, 3]
    """
    changes = np.empty(ordered.size, dtype=bool)
    changes[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=changes[1:])
    return np.flatnonzero(changes)


def fit_isotonic_sorted(
    s: np.ndarray, r: np.ndarray, w: np.ndarray, tie: TieBreak | None = None
) -> CalibrationMap:
    """Weighted increasing isotonic fit of ``r`` on ``s``; ``s`` must be sorted ascending.

    Tied scores are pooled first (as scikit-learn does), then pool-adjacent-violators runs on
    the distinct scores, and only the ends of each fitted block are kept as knots.
    """
    starts = run_starts(s)
    if starts.size == s.size:  # no ties: nothing to pool
        x, pooled, weight = s, r, w
    else:
        weight = np.add.reduceat(w, starts)
        pooled = np.add.reduceat(w * r, starts) / weight
        x = s[starts]
    fit = isotonic_regression(pooled, weights=weight, increasing=True)
    first, last = fit.blocks[:-1], fit.blocks[1:] - 1
    knots_x = np.column_stack([x[first], x[last]]).ravel()
    knots_y = np.repeat(fit.x[first], 2)
    keep = np.ones(knots_x.size, dtype=bool)
    keep[1:] = knots_x[1:] != knots_x[:-1]
    tie = tie or TieBreak.for_data(s, r, 1e-3)
    return CalibrationMap("isotonic", knots_x[keep], knots_y[keep], tie.scale, tie.mean, tie.std)


def fit_affine(
    s: np.ndarray, r: np.ndarray, w: np.ndarray, tie: TieBreak | None = None
) -> CalibrationMap | None:
    """Weighted least-squares line with positive slope, clipped to the data's score range;
    ``None`` when the slope is not positive or the scores are constant."""
    s_mean = np.average(s, weights=w)
    r_mean = np.average(r, weights=w)
    var = np.average((s - s_mean) ** 2, weights=w)
    if not var > 0:
        return None
    slope = np.average((s - s_mean) * (r - r_mean), weights=w) / var
    if not slope > 0:
        return None
    x = np.array([s.min(), s.max()])
    tie = tie or TieBreak.for_data(s, r, 1e-3)
    y = r_mean + slope * (x - s_mean)
    return CalibrationMap("affine", x, y, tie.scale, tie.mean, tie.std)


def average_ranks(values: np.ndarray, order: np.ndarray | None = None) -> np.ndarray:
    """0-based ranks with ties given their average rank; ``order`` is an argsort if known.

    >>> average_ranks(np.array([3.0, 1.0, 3.0, 2.0])).tolist()
    [2.5, 0.0, 2.5, 1.0]
    """
    order = np.argsort(values, kind="stable") if order is None else order
    ordered = values[order]
    starts = run_starts(ordered)
    ends = np.append(starts[1:], values.size)
    ranks = np.empty(values.size)
    ranks[order] = np.repeat((starts + ends - 1) / 2.0, ends - starts)
    return ranks


def spearman(s: np.ndarray, r: np.ndarray, s_order: np.ndarray | None = None) -> float:
    """Spearman rank correlation with average ranks for ties; NaN when either is constant.

    >>> spearman(np.array([1.0, 2.0, 3.0]), np.array([1.0, 5.0, 2.0]))
    0.5
    """
    rs, rr = average_ranks(s, s_order), average_ranks(r)
    rs -= rs.mean()
    rr -= rr.mean()
    denominator = np.sqrt(np.dot(rs, rs) * np.dot(rr, rr))
    return float(np.dot(rs, rr) / denominator) if denominator > 0 else float("nan")
