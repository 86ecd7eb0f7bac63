"""Calibrations of a dense progress return against the sparse success of the same episodes.

Every episode of a dense arm runs in the simulator, so each is a calibration pair (progress
made ``P``, success ``s``). :class:`ProgressCalibration` maps ``P`` to the success scale,
refitted after every round on the pairs of the last ``window`` rounds:

* ``"affine"`` (default): ``f(P) = mean(s) + b * (P - mean(P))`` with the slope ``b`` fitted
  *within groups* (episodes from one start, centred on their group's means: GRPO only ever
  compares members of a group, and a pooled slope would mix in how hard each start is). The
  slope is kept only when it is significantly positive (one-sided t-statistic ``>= z``), else
  it is 0 and the fused reward is the sparse success alone: an uninformative progress model
  leaves the reward as it was. A line keeps the order of failures by their progress, which is
  the dense signal.
* ``"isotonic"``: the fusion's isotonic calibrator
  (:class:`~wmrl_env.fusion.calibration.OnlineCalibrator`). When progress separates successes
  from failures it becomes a step, every failure maps to nearly the same value and the fused
  reward is the sparse success again (kept for comparison).
* ``"none"``: the raw progress return.

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> made = rng.uniform(size=64)
    >>> success = (made + 0.2 * rng.normal(size=64) > 0.7).astype(float)
    >>> calibration = ProgressCalibration(min_pairs=16)
    >>> calibration.update(made, success, np.repeat(np.arange(16), 4))
    >>> values = calibration.transform(np.array([0.1, 0.4]))
    >>> bool(calibration.slope > 0 and values[1] > values[0])  # failures stay ordered
    True
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

__all__ = ["CALIBRATIONS", "ProgressCalibration", "within_group_slope"]

CALIBRATIONS: tuple[str, ...] = ("affine", "isotonic", "none")


def within_group_slope(
    made: np.ndarray, success: np.ndarray, groups: np.ndarray
) -> tuple[float, float]:
    """``(slope, t)``: least-squares slope of success on progress within groups (both centred
    on their group's means) and its t-statistic (0 when undefined: too few pairs, no spread,
    or a perfect fit with no residual left, which gives ``inf``)."""
    made, success = np.asarray(made, np.float64), np.asarray(success, np.float64)
    ids, inverse, counts = np.unique(groups, return_inverse=True, return_counts=True)
    sums_p = np.bincount(inverse, made, len(ids))
    sums_s = np.bincount(inverse, success, len(ids))
    p = made - (sums_p / counts)[inverse]
    s = success - (sums_s / counts)[inverse]
    sxx = float(p @ p)
    dof = made.size - len(ids) - 1  # one mean per group and the slope
    if dof < 1 or not sxx > 1e-12:
        return 0.0, 0.0
    slope = float(p @ s) / sxx
    residual = float(np.sum((s - slope * p) ** 2)) / dof
    if residual <= 0.0:
        return slope, float(np.inf) if slope > 0 else 0.0
    return slope, slope / np.sqrt(residual / sxx)


class ProgressCalibration:
    """Progress made to the success scale, refitted every round; see the module docstring.

    Args:
        kind: ``"affine"``, ``"isotonic"`` or ``"none"``.
        window: rounds of pairs kept.
        min_pairs: fewest pairs before a fit (before it: ``affine`` pays the sparse success
            alone, ``isotonic`` the raw progress, as the fusion's calibrator does).
        z: ``affine``: the slope's one-sided t-statistic needed to keep it.
    """

    def __init__(
        self, kind: str = "affine", window: int = 8, min_pairs: int = 16, z: float = 2.0
    ) -> None:
        from wmrl_env.fusion.calibration import OnlineCalibrator

        if kind not in CALIBRATIONS:
            raise ValueError(f"calibration must be one of {CALIBRATIONS}, got {kind!r}")
        if window < 1 or min_pairs < 2:
            raise ValueError("window must be >= 1 and min_pairs >= 2")
        if not z >= 0:
            raise ValueError(f"z must be >= 0, got {z}")
        self.kind, self.min_pairs, self.z = kind, min_pairs, z
        self.slope, self.t_statistic, self.centre = 0.0, 0.0, (0.0, 0.0)
        self._rounds: deque[tuple[np.ndarray, np.ndarray, np.ndarray]] = deque(maxlen=window)
        self._round = 0
        self._isotonic = (
            OnlineCalibrator(window=window, min_pairs=min_pairs, decay=1.0)
            if kind == "isotonic"
            else None
        )

    @property
    def gate_open(self) -> bool:
        """Whether the dense part currently moves the reward (``affine``: a kept slope)."""
        return self.kind != "affine" or self.slope > 0

    def update(self, made: np.ndarray, success: np.ndarray, groups: np.ndarray) -> None:
        """Add one round's pairs (``groups``: each episode's start, numbered within the
        round) and refit."""
        made, success = np.asarray(made, np.float64), np.asarray(success, np.float64)
        groups = np.asarray(groups)
        if not made.shape == success.shape == groups.shape or made.ndim != 1:
            raise ValueError("made, success and groups must be 1-D of one shape")
        if not (np.isfinite(made).all() and np.isfinite(success).all()):
            raise ValueError("progress made and success must be finite")
        if self._isotonic is not None:
            self._isotonic.update(made, success, groups=groups)
            return
        self._round += 1
        keys = np.unique(groups, return_inverse=True)[1] + 1_000_000 * self._round
        self._rounds.append((made, success, keys))
        if self.kind == "none":
            return
        all_made, all_success, all_groups = (
            np.concatenate(part) for part in zip(*self._rounds, strict=True)
        )
        self.slope, self.t_statistic = 0.0, 0.0
        if all_made.size >= self.min_pairs:
            slope, t = within_group_slope(all_made, all_success, all_groups)
            if slope > 0 and t >= self.z:
                self.slope, self.t_statistic = slope, t
        self.centre = (float(all_made.mean()), float(all_success.mean()))

    def transform(self, made: np.ndarray) -> np.ndarray:
        """``f(P)`` for each progress made ``P``."""
        made = np.asarray(made, np.float64)
        if self._isotonic is not None:
            return self._isotonic.transform(made)
        if self.kind == "none":
            return made.copy()
        return self.centre[1] + self.slope * (made - self.centre[0])

    def summary(self) -> dict[str, Any]:
        """The current fit: kind, slope and its t-statistic (``affine``)."""
        t = self.t_statistic if np.isfinite(self.t_statistic) else None  # a perfect fit
        return {"calibration": self.kind, "slope": self.slope, "t": t}
