"""The gate's evidence: decayed sums per cluster, found by label, forgotten once negligible.

Every step multiplies the pool by ``decay``; a cluster that has not grown for ``a`` steps
holds ``decay ** a`` of its evidence and is dropped once that share falls below
:data:`FORGOTTEN` (with the default decay 0.95, after 179 steps). A cluster is found by its
label in a dict, and a dropped cluster's slot is reused, so a step costs the same at step
1,000 as at step 10: the pool holds at most the clusters of the last ~180 steps.

Example:
    >>> pool = ClusterPool(decay=0.5, columns=2)
    >>> pool.add(["a", "b", "a"], np.array([[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]]))
    >>> pool.age()
    >>> pool.totals().tolist(), pool.num_clusters
    ([3.0, 1.5], 2)
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

FORGOTTEN = 1e-4  # a cluster whose evidence has decayed below this share is dropped


def max_age(decay: float) -> float:
    """The oldest age (steps without growth) at which ``decay ** age >= FORGOTTEN``."""
    if decay >= 1.0:
        return math.inf
    age = math.floor(math.log(FORGOTTEN) / math.log(decay))
    while decay ** (age + 1) >= FORGOTTEN:  # guard the float edge of the logarithm
        age += 1
    while age > 0 and decay**age < FORGOTTEN:
        age -= 1
    return float(age)


class ClusterPool:
    """Per-cluster sums in ``columns`` rows (``sums[:, slot]``), decayed by :meth:`age`.

    Free slots hold zeros, so sums over all slots are sums over the clusters held.
    """

    def __init__(self, decay: float, columns: int) -> None:
        self.decay = decay
        self.max_age = max_age(decay)
        self.sums = np.zeros((columns, 0))
        self._last = np.zeros(0, dtype=np.int64)  # the step each slot last grew
        self._used = np.zeros(0, dtype=bool)
        self._labels: list[Hashable] = []  # per slot (stale for a free slot)
        self._slots: dict[Hashable, int] = {}
        self._free: list[int] = []
        self.steps = 0

    @property
    def num_clusters(self) -> int:
        return len(self._slots)

    def totals(self) -> np.ndarray:
        """Each row's sum over the clusters held."""
        return self.sums.sum(axis=1)

    def age(self) -> None:
        """One step passes: every cluster's evidence is multiplied by ``decay``."""
        self.steps += 1
        if self.decay != 1.0:
            self.sums *= self.decay

    def add(self, labels: Sequence[Hashable], values: np.ndarray) -> None:
        """Add ``values[:, i]`` to the cluster ``labels[i]`` (created when new; it is now 0
        steps old)."""
        slots = np.fromiter((self._slot(label) for label in labels), np.intp, len(labels))
        for row in range(self.sums.shape[0]):
            self.sums[row] += np.bincount(slots, values[row], minlength=self.sums.shape[1])
        self._last[slots] = self.steps

    def forget(self) -> None:
        """Drop the clusters whose evidence has decayed below :data:`FORGOTTEN`."""
        if math.isinf(self.max_age):
            return
        expired = np.flatnonzero(self._used & (self.steps - self._last > self.max_age))
        if not expired.size:
            return
        for slot in expired.tolist():
            del self._slots[self._labels[slot]]
        self._free.extend(expired[::-1].tolist())
        self.sums[:, expired] = 0.0
        self._used[expired] = False

    def _slot(self, label: Hashable) -> int:
        slot = self._slots.get(label)
        if slot is not None:
            return slot
        if not self._free:
            self._grow()
        slot = self._free.pop()
        self._slots[label] = slot
        self._labels[slot] = label
        self._used[slot] = True
        return slot

    def _grow(self) -> None:
        old = self.sums.shape[1]
        new = max(64, 2 * old)
        self.sums = np.concatenate([self.sums, np.zeros((self.sums.shape[0], new - old))], 1)
        self._last = np.concatenate([self._last, np.zeros(new - old, dtype=np.int64)])
        self._used = np.concatenate([self._used, np.zeros(new - old, dtype=bool)])
        self._labels.extend([None] * (new - old))
        self._free.extend(range(new - 1, old - 1, -1))

    def state_dict(self) -> dict[str, Any]:
        return {
            "slot_labels": [
                self._labels[slot] if used else None
                for slot, used in enumerate(self._used.tolist())
            ],
            "used": self._used.copy(),
            "sums": self.sums.copy(),
            "last": self._last.copy(),
            "free": list(self._free),
            "steps": self.steps,
        }

    def load_state_dict(self, state: dict[str, Any], hashable: Any) -> None:
        self.sums = np.array(state["sums"], dtype=np.float64)
        self._last = np.array(state["last"], dtype=np.int64)
        self._used = np.array(state["used"], dtype=bool)
        self._labels = [hashable(label) for label in state["slot_labels"]]
        self._slots = {self._labels[slot]: slot for slot in np.flatnonzero(self._used).tolist()}
        self._free = [int(slot) for slot in state["free"]]
        self.steps = int(state["steps"])

    def load_clusters(
        self, labels: list[Hashable], sums: np.ndarray, age: np.ndarray, steps: int
    ) -> None:
        """Fill an empty pool from a list of clusters (a state saved in the compact layout)."""
        self.steps = steps
        if labels:
            self.add(labels, sums)
            self._last[[self._slots[label] for label in labels]] = steps - np.asarray(age)
