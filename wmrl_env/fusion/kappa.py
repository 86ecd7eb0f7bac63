"""Inverse-variance denoising: how much noisier the world-model reward stream is than the real one.

On anchor groups, with cross-fitted residuals ``e = r - f_{-g}(s)`` centred within each group
(a group-constant bias cancels in GRPO, so it must not count as error) and real rewards
centred the same way::

    sigma2_e = sum(e~^2) / sum(n_g - 1)        sigma2_r = sum(r~^2) / sum(n_g - 1)
    kappa    = clip(1 + sigma2_e / max(sigma2_r, delta), 1, kappa_max)

smoothed across steps by an exponential moving average. Anchor groups then weigh ``kappa``
and world-model groups 1, normalised to mean 1 over trajectories (:func:`fusion_weights`).

Example:
    >>> import numpy as np
    >>> groups = np.array([0, 0, 0, 1, 1, 1])
    >>> real = np.array([0.0, 1.0, 2.0, 1.0, 2.0, 3.0])
    >>> residuals = np.array([0.5, -0.5, 0.0, 0.0, 0.5, -0.5])
    >>> estimator = KappaEstimator(smoothing=1.0)
    >>> round(estimator.update(residuals, real, groups), 3)
    1.25
"""

from __future__ import annotations

from typing import Any

import numpy as np

from wmrl_env.fusion.groups import GroupIndex


def within_group_variances(
    residuals: np.ndarray,
    real: np.ndarray,
    groups: np.ndarray,
    centre: bool = True,
    weights: np.ndarray | None = None,
) -> tuple[float, float, int]:
    """Pooled within-group variances ``(sigma2_e, sigma2_r, dof)`` over the given pairs.

    ``weights`` (per pair, constant within a group; e.g. ``1 / pi``) weigh each group's sums
    of squares and degrees of freedom, so oversampled groups do not dominate. With
    ``centre=False`` (groups of one, e.g. a single-env wrapper) the plain variances of the
    residuals (about zero) and of the real rewards (about their mean) are returned.
    """
    if residuals.size == 0:
        return float("nan"), float("nan"), 0
    w = np.ones(residuals.size) if weights is None else np.asarray(weights, dtype=np.float64)
    if not centre:
        dof = residuals.size - 1
        if dof < 1:
            return float("nan"), float("nan"), 0
        mean_real = np.average(real, weights=w)
        scale = w.sum() * dof / residuals.size
        return (
            float(np.dot(w, residuals**2) / w.sum()),
            float(np.dot(w, (real - mean_real) ** 2) / scale),
            dof,
        )
    index = GroupIndex.from_ids(groups)
    dof = int(np.sum(index.sizes - 1))
    if dof < 1:
        return float("nan"), float("nan"), 0
    e = index.centre(residuals)
    r = index.centre(real)
    weighted_dof = float(np.dot(index.mean(w), index.sizes - 1))
    return float(np.dot(w * e, e) / weighted_dof), float(np.dot(w * r, r) / weighted_dof), dof


class KappaEstimator:
    """Estimates ``kappa`` each step and smooths it across steps.

    Args:
        kappa_max: upper clip.
        smoothing: weight of the newest estimate in the moving average (1.0: no smoothing).
        delta: floor on the real-reward variance.
        centre: centre within groups (GRPO); ``False`` for groups of one.
    """

    def __init__(
        self,
        kappa_max: float = 10.0,
        smoothing: float = 0.3,
        delta: float = 1e-8,
        centre: bool = True,
    ) -> None:
        if kappa_max < 1:
            raise ValueError(f"kappa_max must be >= 1, got {kappa_max}")
        if not 0.0 < smoothing <= 1.0:
            raise ValueError(f"smoothing must be in (0, 1], got {smoothing}")
        self.kappa_max = kappa_max
        self.smoothing = smoothing
        self.delta = delta
        self.centre = centre
        self.kappa = 1.0
        self.raw = float("nan")  # the last step's unsmoothed estimate
        self._initialised = False

    def update(self, residuals: np.ndarray, real: np.ndarray, groups: np.ndarray) -> float:
        """Fold one step's anchor residuals in; returns the smoothed kappa.

        Keeps the previous kappa when there is nothing to estimate from (no anchor pairs,
        only groups of one, or real rewards that do not vary within any group).
        """
        return self.fold_in(*within_group_variances(residuals, real, groups, self.centre))

    def fold_in(self, sigma2_e: float, sigma2_r: float, dof: int) -> float:
        """Like :meth:`update`, from already pooled within-group variances."""
        if dof < 1 or not sigma2_r > 0:
            self.raw = float("nan")
            return self.kappa
        self.raw = float(np.clip(1.0 + sigma2_e / max(sigma2_r, self.delta), 1.0, self.kappa_max))
        if self._initialised:
            self.kappa += self.smoothing * (self.raw - self.kappa)
        else:
            self.kappa, self._initialised = self.raw, True
        return self.kappa

    def state_dict(self) -> dict[str, Any]:
        return {"kappa": self.kappa, "raw": self.raw, "initialised": self._initialised}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.kappa = float(state["kappa"])
        self.raw = float(state["raw"])
        self._initialised = bool(state["initialised"])


def fusion_weights(
    is_anchor: np.ndarray, kappa: float, anchor_share: float | None = None
) -> np.ndarray:
    """Per-trajectory weights: ``kappa`` on anchors, 1 elsewhere, normalised to mean 1.

    The mean is taken over the batch, or, with ``anchor_share`` (e.g. a single-env wrapper
    that anchors each episode with probability ``p``), in expectation over that share.

    >>> fusion_weights(np.array([True, False, False, False]), 4.0).tolist()
    [2.2857142857142856, 0.5714285714285714, 0.5714285714285714, 0.5714285714285714]
    >>> fusion_weights(np.array([True]), 4.0, anchor_share=0.25).tolist()
    [2.2857142857142856]
    """
    share = is_anchor.mean() if anchor_share is None else anchor_share
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"anchor_share must be in [0, 1], got {share}")
    denominator = kappa * share + (1.0 - share)
    return np.where(is_anchor, kappa / denominator, 1.0 / denominator)
