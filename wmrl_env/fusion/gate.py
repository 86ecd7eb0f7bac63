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
whole run, each step's evidence decayed by ``decay`` per step of age (``w``: design weights,
``1 / pi`` under unequal inclusion probabilities). A cluster is a task (``clusters``, e.g. the
group's context), so a task that recurs across steps counts once; by default each (step,
group) is its own cluster. The slope's standard error is the cluster jackknife's (CR3:
each cluster's score divided by ``1 - h_k``, ``h_k`` its leverage), referred to a t
distribution with Bell-McCaffrey degrees of freedom; with ``LCB = lam_hat - t * se`` the weight
is ``clip(min(lam_hat, 2 LCB), 0, 1)``. It exceeds ``2 lam*`` (leaves the never-worse range)
only when ``LCB > lam*``, probability ``<= alpha`` when the bound covers; for a useless world
model (``lam* = 0``) it is 0 but for that share of steps. The weight used at a step comes from
earlier steps only, so it is independent of that step's anchor draw and PPI stays unbiased.
Coverage measured on heterogeneous clusters: ``docs/fusion.md``.

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

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import t as student_t

from wmrl_env.fusion.groups import GroupIndex
from wmrl_env.fusion.precision import StdExponent, precision_weights

FORGOTTEN = 1e-4  # a cluster whose evidence has decayed below this share is dropped


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
    """

    def __init__(self, decay: float = 0.95, alpha: float = 0.05) -> None:
        if not 0.0 < decay <= 1.0:
            raise ValueError(f"decay must be in (0, 1], got {decay}")
        if not 0.0 < alpha < 0.5:
            raise ValueError(f"alpha must be in (0, 0.5), got {alpha}")
        self.decay = decay
        self.alpha = alpha
        self._labels: list[Hashable] = []
        self._sxy = np.empty(0)
        self._sxx = np.empty(0)
        self._age = np.empty(0, dtype=np.int64)  # steps since each cluster last grew
        self.steps = 0
        self.estimate = float("nan")  # the pooled slope lam_hat
        self.standard_error = float("nan")
        self.dof = float("nan")
        self.weight = 0.0  # clip(min(lam_hat, 2 LCB), 0, 1)
        self.std_exponent = StdExponent(decay)  # how far the world model's std is trusted

    @property
    def num_clusters(self) -> int:
        """Clusters with evidence in the pool."""
        return int(np.count_nonzero(self._sxx > 0))

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
        per pair, finite and ``>= 0``) the world model's predictive std: the pairs are then
        also weighed by their relative precision ``(median sigma^2 / sigma^2) ** beta``, with
        ``beta`` learnt from earlier steps' residuals (:mod:`~wmrl_env.fusion.precision`). A
        step with no usable group still ages the pool.
        """
        real, calibrated = np.asarray(real, float), np.asarray(calibrated, float)
        self.steps += 1
        self._sxy *= self.decay
        self._sxx *= self.decay
        self._age += 1
        if std is None or not real.size:
            self.std_exponent.update(np.empty(0), np.empty(0))  # ages its pool
        if real.size:
            index = GroupIndex.from_ids(groups)
            r, f = index.centre(real), index.centre(calibrated)
            w = np.ones(real.size) if weights is None else np.asarray(weights, float)
            if std is not None:  # weighted least squares, the exponent fixed before this step
                std = np.asarray(std, float)
                w = w * precision_weights(std, self.std_exponent.beta)
                previous = self.estimate if np.isfinite(self.estimate) else 0.0
                self.std_exponent.update(std, r - previous * f)
            sxy, sxx = index.sum(w * r * f), index.sum(w * f * f)
            first = np.zeros(index.num_groups, dtype=np.intp)
            first[index.inverse[::-1]] = np.arange(real.size)[::-1]
            if clusters is None:
                labels = [("step", self.steps, g) for g in range(index.num_groups)]
            else:
                labels = [_hashable(c) for c in np.asarray(clusters, dtype=object)[first]]
            for label, a, b, size in zip(labels, sxy, sxx, index.sizes, strict=True):
                if size > 1 and b > 0:
                    self._add(label, float(a), float(b))
        keep = self.decay ** self._age.astype(float) >= FORGOTTEN
        if not keep.all():
            self._labels = [label for label, k in zip(self._labels, keep, strict=True) if k]
            self._sxy, self._sxx, self._age = self._sxy[keep], self._sxx[keep], self._age[keep]
        self._refresh()
        return self.weight

    def _add(self, label: Hashable, sxy: float, sxx: float) -> None:
        try:
            i = self._labels.index(label)
        except ValueError:
            self._labels.append(label)
            self._sxy = np.append(self._sxy, sxy)
            self._sxx = np.append(self._sxx, sxx)
            self._age = np.append(self._age, 0)
            return
        self._sxy[i] += sxy
        self._sxx[i] += sxx
        self._age[i] = 0

    def _refresh(self) -> None:
        bound = slope_bound(self._sxy, self._sxx, self.alpha)
        self.estimate = float(bound.estimate[0])
        self.standard_error = float(bound.standard_error[0])
        self.dof = float(bound.dof[0])
        self.weight = float(bound.weight[0])

    def state_dict(self) -> dict[str, Any]:
        return {
            "labels": list(self._labels),
            "sxy": self._sxy.copy(),
            "sxx": self._sxx.copy(),
            "age": self._age.copy(),
            "steps": self.steps,
            "std_exponent": self.std_exponent.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._labels = [_hashable(label) for label in state["labels"]]
        self._sxy = np.array(state["sxy"], dtype=np.float64)
        self._sxx = np.array(state["sxx"], dtype=np.float64)
        self._age = np.array(state["age"], dtype=np.int64)
        self.steps = int(state["steps"])
        if "std_exponent" in state:  # absent in states saved before the std was used
            self.std_exponent.load_state_dict(state["std_exponent"])
        self._refresh()


def _hashable(label: Any) -> Hashable:
    """A cluster label as a plain hashable (numpy scalars to Python, lists to tuples)."""
    if isinstance(label, np.generic):
        return label.item()
    if isinstance(label, (list, tuple)):
        return tuple(_hashable(x) for x in label)
    return label
