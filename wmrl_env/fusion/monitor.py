"""Reward-hacking monitor: does the gap between calibrated and real scores on anchors grow?

Every step with anchors gives one ``anchor_gap``: the mean of cross-fitted calibrated minus
real score over the anchor trajectories. Online calibration absorbs a steady bias, so a gap
that keeps *growing* means the world model's over-scoring is outrunning the calibration —
the policy is moving towards inputs the world model over-scores (reward hacking) or the world
model is drifting. :class:`GapMonitor` fits a least-squares line to the last ``window`` gaps
against their step and raises the alarm when the slope is positive beyond its noise
(one-sided t-test at level ``alpha`` with ``window - 2`` degrees of freedom) and the fitted
gap at the newest step is positive. A :class:`RewardHackingWarning` is issued once per alarm
episode (when the alarm turns on), not every step.

Example:
    >>> import warnings
    >>> monitor = GapMonitor(window=8)
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     readings = [monitor.update(0.01 * step**2) for step in range(12)]
    >>> readings[-1].alarm, len(caught)
    (True, 1)
"""

from __future__ import annotations

import math
import warnings
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import t as student_t


class RewardHackingWarning(UserWarning):
    """The anchor gap trends upward: the world model over-scores what the policy now does."""


@dataclass(frozen=True)
class GapReading:
    """One step of the monitor: the gap's fitted trend (per step), its t statistic, the alarm."""

    trend: float
    t_statistic: float
    alarm: bool


class GapMonitor:
    """Tests the last ``window`` anchor gaps for an upward trend.

    Args:
        window: gaps in the trend fit (steps without anchors add none).
        alpha: one-sided level of the test at each step.
    """

    def __init__(self, window: int = 16, alpha: float = 0.001) -> None:
        if window < 3:
            raise ValueError(f"window must be >= 3, got {window}")
        if not 0.0 < alpha < 0.5:
            raise ValueError(f"alpha must be in (0, 0.5), got {alpha}")
        self.window = window
        self.alpha = alpha
        self.critical = float(student_t.ppf(1.0 - alpha, window - 2))
        self._points: deque[tuple[float, float]] = deque(maxlen=window)
        self.steps = 0  # updates so far, gaps or not: the time axis of the trend
        self.alarm = False
        self.alarms = 0  # alarm episodes so far

    def update(self, gap: float) -> GapReading:
        """Add one step's gap (NaN: no anchors this step, nothing added) and test."""
        step = self.steps
        self.steps += 1
        if math.isfinite(gap):
            self._points.append((float(step), float(gap)))
        trend, t_stat, newest = self._fit()
        alarm = bool(t_stat > self.critical and newest > 0)
        if alarm and not self.alarm:
            self.alarms += 1
            warnings.warn(
                f"reward hacking? the anchor gap (calibrated minus real score) rises by "
                f"{trend:.3g} per step (t = {t_stat:.1f}) and is {newest:.3g} at update {step}: "
                "the world model over-scores what the policy now produces",
                RewardHackingWarning,
                stacklevel=3,
            )
        self.alarm = alarm
        return GapReading(trend, t_stat, alarm)

    def _fit(self) -> tuple[float, float, float]:
        """``(slope, t statistic, fitted gap at the newest step)``; NaN until the window is full."""
        if len(self._points) < self.window:
            return float("nan"), float("nan"), float("nan")
        x, y = np.array(self._points).T
        xc = x - x.mean()
        sxx = float(xc @ xc)
        slope = float(xc @ (y - y.mean())) / sxx
        residuals = y - y.mean() - slope * xc
        sigma2 = float(residuals @ residuals) / (x.size - 2)
        se = math.sqrt(sigma2 / sxx)
        t_stat = slope / se if se > 0 else (math.inf if slope > 0 else 0.0)
        return slope, t_stat, float(y.mean() + slope * xc[-1])

    def state_dict(self) -> dict[str, Any]:
        return {
            "points": list(self._points),
            "steps": self.steps,
            "alarm": self.alarm,
            "alarms": self.alarms,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._points = deque((tuple(p) for p in state["points"]), maxlen=self.window)
        self.steps = int(state["steps"])
        self.alarm = bool(state["alarm"])
        self.alarms = int(state["alarms"])
