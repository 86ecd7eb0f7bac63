"""The anchor record of one round: which groups are anchors and with what inclusion probability.

:meth:`RewardFusion.select_anchors` starts a record (the random draw, ``pi_g`` per group),
:meth:`RewardFusion.force_anchors` adds groups executed with certainty (``pi_g = 1``, e.g.
because their world-model prediction was invalid), and :meth:`RewardFusion.step` consumes it.
It is the one place where inclusion probabilities live: PPI's unbiasedness rests on them.

Example:
    >>> import numpy as np
    >>> record = AnchorRecord.draw(np.array([0, 0, 1, 1]), np.array([True, False]),
    ...                            np.array([0.5, 0.5]))
    >>> record.force(np.array([False, False, True, False])).tolist()
    [True, True, True, True]
    >>> record.per_trajectory_pi().tolist()
    [0.5, 0.5, 1.0, 1.0]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from wmrl_env.fusion.groups import GroupIndex


@dataclass
class AnchorRecord:
    """One round's anchors, per group (in the order of ``GroupIndex.from_ids(group_ids)``).

    Attributes:
        group_ids: the batch's group ids, per trajectory, as passed to ``select_anchors``.
        drawn: per group, chosen by the random draw.
        pi: per group, the draw's inclusion probability (forced groups: 1).
        forced: per group, anchored with certainty.
    """

    group_ids: np.ndarray
    drawn: np.ndarray
    pi: np.ndarray
    forced: np.ndarray

    @classmethod
    def draw(cls, group_ids: Any, drawn: np.ndarray, pi: np.ndarray) -> AnchorRecord:
        ids = np.array(group_ids, copy=True)
        return cls(ids, drawn.copy(), pi.astype(np.float64), np.zeros(drawn.shape, dtype=bool))

    @property
    def groups(self) -> GroupIndex:
        return GroupIndex.from_ids(self.group_ids)

    @property
    def anchored(self) -> np.ndarray:
        """Per group: drawn or forced."""
        return self.drawn | self.forced

    def force(self, trajectories: np.ndarray) -> np.ndarray:
        """Anchor every group holding a ``True`` entry with ``pi = 1``; returns the anchors
        per trajectory."""
        groups = self.groups
        mask = np.asarray(trajectories)
        if mask.dtype != bool or mask.shape != self.group_ids.shape:
            raise ValueError(
                f"force_anchors needs a bool mask of shape {self.group_ids.shape} (one entry per "
                f"trajectory of the last select_anchors), got {mask.dtype} {mask.shape}"
            )
        newly = groups.count(mask) > 0
        self.forced |= newly
        self.pi[newly] = 1.0
        return groups.broadcast(self.anchored)

    def per_trajectory_pi(self) -> np.ndarray:
        """Inclusion probability of each trajectory's group (0 for groups never anchored)."""
        return self.groups.broadcast(np.where(self.anchored, self.pi, 0.0))

    def matches(self, group_ids: Any) -> bool:
        other = np.asarray(group_ids)
        return other.shape == self.group_ids.shape and bool(np.all(other == self.group_ids))

    def state_dict(self) -> dict[str, Any]:
        return {key: value.copy() for key, value in self.__dict__.items()}

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> AnchorRecord:
        return cls(**{key: np.array(value) for key, value in state.items()})
