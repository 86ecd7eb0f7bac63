"""The world model's weight ``lam``: zero unless the anchors give clear evidence that it helps.

The policy gradient from a world-model group is ``sum_i f~_i grad log p_i`` (``f~``: the
calibrated score centred in its group). PPI's estimator of the all-real gradient,
``lam * f~`` on world-model groups and ``(r~ - lam f~) / pi + lam f~`` on anchors, has
draw variance ``(1/pi - 1) * sum_g (r~_g - lam f~_g)^2``: minimal at the regression slope
``lam* = sum r~ f~ / sum f~^2`` and no worse than ignoring the world model (``lam = 0``,
GRPO on the anchors alone) for any ``lam`` in ``[0, 2 lam*]``. The same slope is the best
linear predictor of a real centred reward from a calibrated one, which is how ``wmrl`` shrinks
its world-model groups.

:class:`WorldModelGate` pools the per-cluster sums ``sum w r~ f~`` and ``sum w f~^2`` over the
run, each step's evidence decayed by ``decay`` per step of age (``w``: design weights,
``1 / pi`` under unequal inclusion probabilities); a cluster whose evidence has decayed
below ``FORGOTTEN`` is dropped (:mod:`~wmrl_env.fusion.cluster_pool`), so a step's cost does
not grow with the run. A cluster is a task (``clusters``, e.g. the group's context), so a
task that recurs across steps counts once; by default each (step, group) is its own cluster.
The slope's standard error is the cluster jackknife's (CR3: each cluster's score divided by
``1 - h_k``, ``h_k`` its leverage), referred to a t distribution with Bell-McCaffrey degrees
of freedom; with ``LCB = lam_hat - t * se`` the weight is ``clip(min(lam_hat, 2 LCB), 0, 1)``.
It exceeds ``2 lam*`` (leaves the never-worse range) only when ``LCB > lam*``, probability
``<= alpha`` when the bound covers; for a useless world model (``lam* = 0``) it is 0 but for
that share of steps.

The world model's std does not move the weight. Weighted by their precision, the pairs
estimate a *weighted* slope: ``lam*`` itself when the slope does not depend on the std,
another one when it does (a world model good where it is sure and poor where it is unsure has
a weighted slope above ``lam*``, and a weight bounded on it left ``[0, 2 lam*]`` in most
steps). One weight serves every group, so its never-worse range is that of the unweighted
slope, and only the unweighted slope's bound guarantees it without assuming how the slope
varies with the std. The weighted slope is kept as a diagnostic (``weighted_estimate``).

The weight used at a step comes from earlier steps only, so it is independent of that step's
anchor draw and PPI stays unbiased. Without new evidence (no usable anchor group) the weight
falls linearly to 0 over ``horizon`` steps (a dead sandbox does not leave the world model's
weight where it was). Coverage measured on heterogeneous clusters: ``docs/fusion.md``.

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> gate = WorldModelGate()
    >>> for _ in range(16):
    ...     f = rng.normal(size=16)
    ...     _ = gate.update(0.8 * f + 0.3 * rng.normal(size=16), f, np.repeat([0, 1], 8))
    >>> 0.7 < gate.weight <= gate.estimate < 0.9
    True
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import t as student_t

from wmrl_env.fusion.cluster_pool import FORGOTTEN, ClusterPool
from wmrl_env.fusion.groups import GroupIndex
from wmrl_env.fusion.precision import StdExponent, precision_weights

__all__ = ["FORGOTTEN", "HORIZON", "SlopeBound", "WorldModelGate", "fade", "slope_bound"]

HORIZON = 20  # steps without new evidence over which the weight falls to 0


@dataclass(frozen=True)
class SlopeBound:
    """The pooled slope, its cluster-jackknife standard error, degrees of freedom and the
    gate's weight, one entry per row of :func:`slope_bound`'s input."""

    estimate: np.ndarray
    standard_error: np.ndarray
    dof: np.ndarray
    weight: np.ndarray


def slope_bound(sxy: np.ndarray, sxx: np.ndarray, alpha: float) -> SlopeBound:
    """The gate's statistics from per-cluster sums ``sxy = sum r~ f~``, ``sxx = sum f~^2``.

    Rows are independent problems (shape ``(R, K)``, or ``(K,)`` for one); clusters with
    ``sxx = 0`` are absent. Fewer than two clusters: NaN statistics and weight 0.

    >>> b = slope_bound(np.array([1.0, 2.0, 3.5]), np.array([2.0, 2.0, 4.0]), alpha=0.05)
    >>> round(float(b.estimate[0]), 3), bool(0 <= b.weight[0] <= b.estimate[0])
    (0.812, True)
    """
    sxy, sxx = np.atleast_2d(np.asarray(sxy, float)), np.atleast_2d(np.asarray(sxx, float))
    present = sxx > 0
    k = present.sum(axis=1)
    total = sxx.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        estimate = sxy.sum(axis=1) / total
        h = np.where(present, sxx / total[:, None], 0.0)
        h = np.minimum(h, 1.0 - 1e-12)
        scores = np.where(present, sxy - estimate[:, None] * sxx, 0.0)
        # CR3 (cluster jackknife): each score inflated by 1 / (1 - h_k)
        variance = np.sum((scores / (1.0 - h)) ** 2, axis=1) / total**2
        # Bell-McCaffrey: tr(B)^2 / tr(B^2), B = D^-1/2 (diag h - h h') D^-1/2, D = diag(1 - h)
        a, v2 = h / (1.0 - h), h**2 / (1.0 - h)
        trace = a.sum(axis=1) - v2.sum(axis=1)
        trace_sq = np.sum(a**2, axis=1) - 2 * np.sum(a * v2, axis=1) + v2.sum(axis=1) ** 2
        dof = trace**2 / trace_sq
    ok = (k >= 2) & (total > 0) & np.isfinite(dof) & (dof > 0)
    nan = np.full(estimate.shape, np.nan)
    estimate = np.where(ok, estimate, nan)
    se = np.where(ok, np.sqrt(variance), nan)
    dof = np.where(ok, dof, nan)
    quantile = student_t.ppf(1.0 - alpha, np.where(ok, dof, 1.0))
    lower = estimate - quantile * se
    weight = np.where(ok, np.clip(np.minimum(estimate, 2.0 * lower), 0.0, 1.0), 0.0)
    return SlopeBound(estimate, se, dof, weight)


class WorldModelGate:
    """Run-pooled, confidence-bounded regression slope of real on calibrated centred scores.

    Args:
        decay: weight of a step's evidence per step of age (``1.0``: the whole run equally).
        alpha: one-sided level of the lower confidence bound (smaller: more evidence needed).
        horizon: steps without new evidence over which the weight falls linearly to 0
            (``None``: it holds; the evidence's decay alone does not move it).
    """

    def __init__(
        self, decay: float = 0.95, alpha: float = 0.05, horizon: int | None = HORIZON
    ) -> None:
        if not 0.0 < decay <= 1.0:
            raise ValueError(f"decay must be in (0, 1], got {decay}")
        if not 0.0 < alpha < 0.5:
            raise ValueError(f"alpha must be in (0, 0.5), got {alpha}")
        if horizon is not None and (isinstance(horizon, bool) or not horizon >= 1):
            raise ValueError(f"horizon must be a number of steps >= 1 or None, got {horizon!r}")
        self.decay = decay
        self.alpha = alpha
        self.horizon = horizon
        # rows: sum w v r~ f~, sum w v f~^2 (v: precision weights), sum w r~ f~, sum w f~^2
        self._pool = ClusterPool(decay, columns=4)
        self.stale = 0  # steps since the last one that brought evidence
        self.estimate = float("nan")  # the pooled slope lam_hat
        self.standard_error = float("nan")
        self.dof = float("nan")
        self.weighted_estimate = float("nan")  # the precision-weighted slope (a diagnostic)
        self.bound_weight = 0.0  # clip(min(lam_hat, 2 LCB), 0, 1): what the evidence supports
        self.weight = 0.0  # bound_weight, faded after steps without evidence
        self.std_exponent = StdExponent(decay)  # how far the world model's std is trusted

    @property
    def steps(self) -> int:
        return self._pool.steps

    @property
    def num_clusters(self) -> int:
        """Clusters with evidence in the pool."""
        return self._pool.num_clusters

    def weights_for(self, clusters: Any) -> float:
        """The weight of a sample of any cluster: one for all (see ``ClusterGates``)."""
        return self.weight

    def update(
        self,
        real: np.ndarray,
        calibrated: np.ndarray,
        groups: np.ndarray,
        clusters: np.ndarray | None = None,
        weights: np.ndarray | None = None,
        std: np.ndarray | None = None,
    ) -> float:
        """Add one step's anchor pairs (cross-fitted calibrated scores); returns the new weight.

        ``groups`` label the pairs' groups (centring); ``clusters`` (optional, per pair,
        constant within a group) the task each group belongs to; ``weights`` (optional, per
        pair, constant within a group) design weights such as ``1 / pi``; ``std`` (optional,
        per pair, finite and ``>= 0``) the world model's predictive std: it feeds the
        precision-weighted slope ``weighted_estimate``, each pair weighed by ``(median sigma^2
        / sigma^2) ** beta``, ``beta`` learnt from earlier steps' residuals
        (:mod:`~wmrl_env.fusion.precision`); the weight stays the unweighted slope's. A step
        with no usable group still ages the pool, and counts towards ``horizon``.
        """
        real, calibrated = np.asarray(real, float), np.asarray(calibrated, float)
        pool = self._pool
        pool.age()
        if std is None or not real.size:
            self.std_exponent.update(np.empty(0), np.empty(0))  # ages its pool
        added = False
        if real.size:
            index = GroupIndex.from_ids(groups)
            r, f = index.centre(real), index.centre(calibrated)
            w = np.ones(real.size) if weights is None else np.asarray(weights, float)
            v = np.ones(real.size)
            if std is not None:  # precision weights, the exponent fixed before this step
                std = np.asarray(std, float)
                v = precision_weights(std, self.std_exponent.beta)
                previous = self.estimate if np.isfinite(self.estimate) else 0.0
                self.std_exponent.update(std, r - previous * f)
            products = (w * v * r * f, w * v * f * f, w * r * f, w * f * f)
            sums = np.stack([index.sum(product) for product in products])
            usable = (index.sizes > 1) & (sums[1] > 0)
            if usable.any():
                first = np.zeros(index.num_groups, dtype=np.intp)
                first[index.inverse[::-1]] = np.arange(real.size)[::-1]
                rows = np.flatnonzero(usable)
                if clusters is None:
                    labels = [("step", pool.steps, int(g)) for g in rows]
                else:
                    chosen = np.asarray(clusters, dtype=object)[first[rows]]
                    labels = [_hashable(c) for c in chosen]
                pool.add(labels, sums[:, rows])
                added = True
        pool.forget()
        self.stale = 0 if added else self.stale + 1
        self._refresh()
        return self.weight

    def _refresh(self) -> None:
        sums = self._pool.sums
        bound = slope_bound(sums[2], sums[3], self.alpha)
        self.estimate = float(bound.estimate[0])
        self.standard_error = float(bound.standard_error[0])
        self.dof = float(bound.dof[0])
        total = sums[1].sum()
        self.weighted_estimate = float(sums[0].sum() / total) if total > 0 else math.nan
        self.bound_weight = float(bound.weight[0])
        self.weight = self.bound_weight * fade(self.stale, self.horizon)

    def state_dict(self) -> dict[str, Any]:
        return {
            "pool": self._pool.state_dict(),
            "stale": self.stale,
            "std_exponent": self.std_exponent.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("scope") == "cluster":
            raise ValueError("this state is a per-cluster gate's: build the fusion with that scope")
        self._pool = ClusterPool(self.decay, columns=4)
        if "pool" in state:
            self._pool.load_state_dict(state["pool"], _hashable)
        else:  # the compact layout of earlier versions: one weighted pair of sums per cluster
            labels = [_hashable(label) for label in state["labels"]]
            sxy = np.array(state["sxy"], dtype=np.float64)
            sxx = np.array(state["sxx"], dtype=np.float64)
            self._pool.load_clusters(
                labels, np.stack([sxy, sxx, sxy, sxx]), state["age"], int(state["steps"])
            )
        self.stale = int(state.get("stale", 0))
        if "std_exponent" in state:  # absent in states saved before the std was used
            self.std_exponent.load_state_dict(state["std_exponent"])
        self._refresh()


def fade(stale: int, horizon: int | None) -> float:
    """The share of its weight the gate keeps after ``stale`` steps without evidence.

    >>> fade(0, 20), fade(5, 20), fade(25, 20), fade(500, None)
    (1.0, 0.75, 0.0, 1.0)
    """
    if horizon is None:
        return 1.0
    return max(0.0, 1.0 - stale / horizon)


def _hashable(label: Any) -> Hashable:
    """A cluster label as a plain hashable (numpy scalars to Python, lists to tuples)."""
    if isinstance(label, np.generic):
        return label.item()
    if isinstance(label, (list, tuple)):
        return tuple(_hashable(x) for x in label)
    return label
