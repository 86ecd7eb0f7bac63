"""Online debiasing: an increasing map from world-model score to real score, refit every step.

The map is an isotonic regression of real scores ``r`` on world-model scores ``s`` over the
anchor pairs of the last ``window`` steps, weighted ``decay ** age`` so that it follows drift.
It is always *increasing* and clipped outside the fitted range. When the data cannot support
it (fewer than ``min_pairs`` pairs, fewer than ``min_groups`` anchor groups, or a rank
correlation that is not positive) the calibrator falls back, in order, to the previous map,
an affine fit with positive slope, and the identity.

Isotonic regression pools ties and can make a whole group's calibrated scores equal, which
would erase that group's advantages; a tiny monotone tie-break
(``tie_break * span(f) * standardised s``) keeps the ranking of every group.

Residuals used to estimate error are *cross-fitted*: the current step's anchor groups are split
into folds and each fold is predicted by a map fitted without it (in-sample isotonic residuals
are optimistic, even exactly zero).

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> truth = rng.uniform(size=400)
    >>> wm = truth**3 + 0.3                      # monotone distortion plus bias
    >>> calibrator = OnlineCalibrator(min_pairs=8)
    >>> update = calibrator.update(wm, truth)
    >>> update.fallback is None, bool(np.abs(calibrator.transform(wm) - truth).max() < 0.05)
    (True, True)
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from wmrl_env.fusion.groups import GroupIndex
from wmrl_env.fusion.maps import (
    IDENTITY,
    CalibrationMap,
    TieBreak,
    average_ranks,
    fit_affine,
    fit_isotonic_sorted,
    run_starts,
    spearman,
)
from wmrl_env.fusion.window import SortedPairWindow

__all__ = [  # the maps and fits live in maps.py; imported from here too
    "CalibrationMap",
    "CalibrationUpdate",
    "OnlineCalibrator",
    "TieBreak",
    "average_ranks",
    "fit_affine",
    "fit_isotonic_sorted",
    "run_starts",
    "spearman",
]


@dataclass(frozen=True)
class CalibrationUpdate:
    """What one :meth:`OnlineCalibrator.update` did.

    Attributes:
        map: the map now in use.
        fallback: ``None`` when the isotonic fit was used, else ``"previous"``, ``"affine"``
            or ``"identity"``.
        reason: why it fell back (empty when it did not).
        cross_fitted: shape ``(n,)``, for this step's pairs, the prediction of a map fitted
            without the pair's group (NaN when no out-of-sample map existed).
        n_pairs: pairs in the window.
        n_groups: anchor groups in the window.
        spearman: rank correlation of the window's pairs (NaN when undefined).
    """

    map: CalibrationMap
    fallback: str | None
    reason: str
    cross_fitted: np.ndarray
    n_pairs: int
    n_groups: int
    spearman: float


class OnlineCalibrator:
    """Isotonic calibration over a sliding, age-weighted window of anchor pairs.

    Args:
        window: steps of anchor pairs kept.
        decay: weight multiplier per step of age (``1.0``: no decay).
        min_pairs: fewest pairs for an isotonic fit.
        min_groups: fewest anchor groups in the window for an isotonic fit.
        n_folds: folds over the current step's groups for cross-fitted residuals.
        tie_break: relative size of the monotone tie-break.

    >>> calibrator = OnlineCalibrator()
    >>> calibrator.transform(np.array([0.3])).tolist()      # identity until fitted
    [0.3]
    """

    def __init__(
        self,
        window: int = 8,
        decay: float = 0.8,
        min_pairs: int = 16,
        min_groups: int = 2,
        n_folds: int = 2,
        tie_break: float = 1e-3,
    ) -> None:
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        if not 0.0 < decay <= 1.0:
            raise ValueError(f"decay must be in (0, 1], got {decay}")
        if n_folds < 2:
            raise ValueError(f"n_folds must be >= 2, got {n_folds}")
        if min_pairs < 2 or min_groups < 1:
            raise ValueError("min_pairs must be >= 2 and min_groups >= 1")
        self.window = window
        self.decay = decay
        self.min_pairs = min_pairs
        self.min_groups = min_groups
        self.n_folds = n_folds
        self.tie_break = tie_break
        self.map: CalibrationMap = IDENTITY
        self._fitted = False  # whether ``map`` came from data, i.e. a "previous map" exists
        self._window = SortedPairWindow(window)
        self._last_residuals = np.empty(0)
        self._warned_constant = False

    def transform(self, scores: np.ndarray) -> np.ndarray:
        """Calibrated scores under the current map."""
        return self.map(scores)

    def update(
        self,
        wm_scores: np.ndarray,
        real_scores: np.ndarray,
        groups: np.ndarray | None = None,
        weights: np.ndarray | None = None,
    ) -> CalibrationUpdate:
        """Add one step's anchor pairs, refit, and cross-fit this step's pairs.

        ``groups`` labels each pair's group (default: each pair its own group); folds are
        whole groups. ``weights`` (default 1) are design weights, ``1 / pi`` under unequal
        inclusion probabilities: the fit weighs each pair ``weight * decay ** age``. With no
        pairs this step the window still ages and the map is refit.
        """
        s = np.asarray(wm_scores, dtype=np.float64)
        r = np.asarray(real_scores, dtype=np.float64)
        if s.shape != r.shape or s.ndim != 1:
            raise ValueError(f"wm_scores {s.shape} and real_scores {r.shape} must be equal 1-D")
        if not (np.isfinite(s).all() and np.isfinite(r).all()):
            raise ValueError("calibration pairs must be finite (drop failed executions first)")
        labels = np.arange(s.size) if groups is None else np.asarray(groups)
        w = np.ones(s.size) if weights is None else np.asarray(weights, dtype=np.float64)
        if w.shape != s.shape or not (np.isfinite(w).all() and (w > 0).all()):
            raise ValueError(f"weights must be {s.shape} positive finite numbers")
        if labels.shape != s.shape:
            raise ValueError(f"groups {labels.shape} must match the pairs {s.shape}")
        dense = GroupIndex.from_ids(labels).inverse if s.size else labels.astype(np.intp)
        n_current_groups = int(dense.max()) + 1 if s.size else 0
        previous = self.map if self._fitted else None

        window = self._window
        positions = window.add(s, r, n_current_groups, w)
        ws, wr = window.scores, window.reals
        ww = (self.decay ** np.arange(self.window, dtype=np.float64))[window.ages()]
        ww = ww * window.weights
        newest = window.newest(at_least=SPEARMAN_PAIRS)
        rho = _sorted_spearman(ws, wr, newest)
        tie = TieBreak.for_data(ws, wr, self.tie_break) if ws.size else None

        reason = self._reason_not_to_fit(ws, window.num_groups, rho)
        if not reason:
            fallback, chosen = None, fit_isotonic_sorted(ws, wr, ww, tie)
            cross_fitted = self._cross_fit(s, dense, positions, ww, tie, previous, newest)
        else:
            fallback, chosen = self._fallback(ws, wr, ww, tie, previous, reason)
            # a previous map or the identity never saw this step's data; an affine fallback
            # has two parameters, so its in-sample optimism is negligible
            cross_fitted = chosen(s)
        self.map = chosen
        self._fitted = self._fitted or fallback in (None, "affine")
        self._last_residuals = r - cross_fitted
        return CalibrationUpdate(
            chosen, fallback, reason, cross_fitted, ws.size, window.num_groups, rho
        )

    def window_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """The (world-model score, real score) pairs in the window, sorted by score."""
        return self._window.scores.copy(), self._window.reals.copy()

    def cross_fitted_residuals(self) -> np.ndarray:
        """Residuals ``r - f_{-fold}(s)`` of the pairs added by the last :meth:`update`.

        NaN for a pair whose fold had no out-of-sample map yet (too little data): leave
        those out of any error estimate."""
        return self._last_residuals.copy()

    def state_dict(self) -> dict[str, Any]:
        return {
            "map": self.map.state_dict(),
            "fitted": self._fitted,
            "window": self._window.state_dict(),
            "last_residuals": self._last_residuals.copy(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.map = CalibrationMap.from_state_dict(state["map"])
        self._fitted = bool(state["fitted"])
        self._window.load_state_dict(state["window"])
        self._last_residuals = np.array(state["last_residuals"])

    def _reason_not_to_fit(self, sorted_scores: np.ndarray, n_groups: int, rho: float) -> str:
        if sorted_scores.size >= 2 and sorted_scores[0] == sorted_scores[-1]:
            return "world-model scores are constant"
        if sorted_scores.size < self.min_pairs:
            return f"{sorted_scores.size} pairs < min_pairs={self.min_pairs}"
        if n_groups < self.min_groups:
            return f"{n_groups} anchor groups < min_groups={self.min_groups}"
        if not rho > 0:
            return f"rank correlation {rho:.3f} is not positive"
        return ""

    def _fallback(
        self,
        s: np.ndarray,
        r: np.ndarray,
        w: np.ndarray,
        tie: TieBreak | None,
        previous: CalibrationMap | None,
        reason: str,
    ) -> tuple[str, CalibrationMap]:
        if reason == "world-model scores are constant":
            if not self._warned_constant:  # once per calibrator: it may recur every step
                warnings.warn(f"calibration falls back to identity: {reason}", stacklevel=3)
                self._warned_constant = True
            return "identity", IDENTITY
        if previous is not None:
            return "previous", previous
        affine = fit_affine(s, r, w, tie) if s.size >= 2 else None
        if affine is not None:
            return "affine", affine
        return "identity", IDENTITY

    def _cross_fit(
        self,
        s: np.ndarray,
        dense: np.ndarray,
        positions: np.ndarray,
        weights: np.ndarray,
        tie: TieBreak,
        previous: CalibrationMap | None,
        newest: np.ndarray,
    ) -> np.ndarray:
        """For this step's pairs, predictions of maps fitted without the pair's fold.

        Each fold's map passes the same guards as the main one (``min_pairs``, ``min_groups``,
        a positive rank correlation) on the data it keeps, and falls back the same way
        (previous map, then an affine fit); with neither, that fold's predictions stay
        unknown (NaN). The window is sorted once; each fold is a boolean mask over it.
        """
        out = np.full(s.size, np.nan)
        if s.size == 0:
            return out
        ws, wr = self._window.scores, self._window.reals
        n_current = int(dense.max()) + 1
        n_folds = min(self.n_folds, n_current)
        fold_of_pair = dense % n_folds
        fold_in_window = np.full(ws.size, -1)
        fold_in_window[positions] = fold_of_pair
        for fold in range(n_folds):
            keep = fold_in_window != fold
            held_out = fold_of_pair == fold
            kept_s, kept_r, kept_w = ws[keep], wr[keep], weights[keep]
            groups_in_fold = int(np.unique(dense[held_out]).size)
            rho = _sorted_spearman(kept_s, kept_r, newest[keep])
            reason = self._reason_not_to_fit(kept_s, self._window.num_groups - groups_in_fold, rho)
            if not reason:
                fold_map = fit_isotonic_sorted(kept_s, kept_r, kept_w, tie)
            elif previous is not None:
                fold_map = previous
            else:
                fold_map = fit_affine(kept_s, kept_r, kept_w, tie) if kept_s.size >= 2 else None
            if fold_map is not None:  # else no out-of-sample map: the residuals stay unknown
                out[held_out] = fold_map(s[held_out])
        return out


SPEARMAN_PAIRS = 4096  # the window's rank correlation uses at least this many newest pairs


def _sorted_spearman(sorted_scores: np.ndarray, reals: np.ndarray, mask: np.ndarray) -> float:
    """Spearman of the masked pairs of score-sorted arrays (NaN with fewer than 2)."""
    if int(mask.sum()) < 2:
        return float("nan")
    s = sorted_scores[mask]
    return spearman(s, reals[mask], s_order=np.arange(s.size))
