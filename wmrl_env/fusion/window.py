"""A sliding window of (score, real) pairs kept sorted by score across steps.

Each step merges its few new pairs into the already sorted window (``searchsorted`` plus one
scatter) instead of re-sorting everything, and drops the step that ages out. Fits and their
cross-fitting folds then work on boolean masks of one sorted array.

Example:
    >>> import numpy as np
    >>> window = SortedPairWindow(steps=2)
    >>> window.add(np.array([0.5, 0.1]), np.array([1.0, 0.0])).tolist()
    [1, 0]
    >>> window.add(np.array([0.3]), np.array([0.5])).tolist()
    [1]
    >>> window.scores.tolist(), window.ages().tolist()
    ([0.1, 0.3, 0.5], [1, 0, 1])
    >>> _ = window.add(np.array([0.9]), np.array([1.0]))    # the first step ages out
    >>> window.scores.tolist()
    [0.3, 0.9]
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np


class SortedPairWindow:
    """The pairs of the last ``steps`` steps, sorted by score, each stamped with its step."""

    def __init__(self, steps: int) -> None:
        if steps < 1:
            raise ValueError(f"steps must be >= 1, got {steps}")
        self.steps = steps
        self.scores = np.empty(0)
        self.reals = np.empty(0)
        self.weights = np.empty(0)  # design weights (1 / pi), 1 by default
        self.stamps = np.empty(0, dtype=np.int64)
        self.clock = 0  # stamp of the newest step
        self.groups_per_step: deque[int] = deque(maxlen=steps)

    def __len__(self) -> int:
        return int(self.scores.size)

    @property
    def num_groups(self) -> int:
        """Anchor groups in the window."""
        return sum(self.groups_per_step)

    def ages(self) -> np.ndarray:
        """Steps since each pair was added (0 for the newest step)."""
        return self.clock - self.stamps

    def add(
        self,
        scores: np.ndarray,
        reals: np.ndarray,
        num_groups: int = 0,
        weights: np.ndarray | None = None,
    ) -> np.ndarray:
        """Start a new step with these pairs (with design ``weights``, default 1); returns
        where each landed in the sorted arrays."""
        weights = np.ones(scores.size) if weights is None else weights
        self.clock += 1
        self.groups_per_step.append(num_groups)
        keep = self.stamps > self.clock - self.steps
        old_scores, old_reals, old_stamps = self.scores[keep], self.reals[keep], self.stamps[keep]
        old_weights = self.weights[keep]

        order = np.argsort(scores, kind="stable")
        new_scores = scores[order]
        slots = np.searchsorted(old_scores, new_scores, side="right") + np.arange(order.size)
        total = old_scores.size + order.size
        is_new = np.zeros(total, dtype=bool)
        is_new[slots] = True
        self.scores = np.empty(total)
        self.reals = np.empty(total)
        self.weights = np.empty(total)
        self.stamps = np.empty(total, dtype=np.int64)
        self.scores[slots], self.scores[~is_new] = new_scores, old_scores
        self.reals[slots], self.reals[~is_new] = reals[order], old_reals
        self.weights[slots], self.weights[~is_new] = weights[order], old_weights
        self.stamps[slots], self.stamps[~is_new] = self.clock, old_stamps
        positions = np.empty(order.size, dtype=np.intp)
        positions[order] = slots
        return positions

    def newest(self, at_least: int) -> np.ndarray:
        """Mask (in sorted order) of the pairs of the newest steps that hold at least
        ``at_least`` pairs."""
        ages = self.ages()
        counts = np.bincount(ages, minlength=self.steps)
        covered = np.searchsorted(np.cumsum(counts), min(at_least, len(self)))
        return ages <= covered

    def state_dict(self) -> dict[str, Any]:
        return {
            "scores": self.scores.copy(),
            "reals": self.reals.copy(),
            "weights": self.weights.copy(),
            "stamps": self.stamps.copy(),
            "clock": self.clock,
            "groups_per_step": list(self.groups_per_step),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.scores = np.array(state["scores"], dtype=np.float64)
        self.reals = np.array(state["reals"], dtype=np.float64)
        self.weights = np.array(state.get("weights", np.ones(self.reals.size)), dtype=np.float64)
        self.stamps = np.array(state["stamps"], dtype=np.int64)
        self.clock = int(state["clock"])
        self.groups_per_step = deque(state["groups_per_step"], maxlen=self.steps)
