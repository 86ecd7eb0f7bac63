"""The anchor record of one round: which groups are anchors and with what inclusion probability.

:meth:`RewardFusion.select_anchors` starts a record (the random draw, ``pi_g`` per group),
:meth:`RewardFusion.force_anchors` adds groups executed with certainty (``pi_g = 1``, e.g.
because their world-model prediction was invalid), :meth:`RewardFusion.screen_anchors`
executes only some members of the drawn groups (``pi_{i|g}`` each,
:mod:`~wmrl_env.fusion.screening`), and :meth:`RewardFusion.step` consumes it. It is the one
place where inclusion probabilities live: PPI's unbiasedness rests on them.

Example:
    >>> import numpy as np
    >>> record = AnchorRecord.draw(np.array([0, 0, 1, 1]), np.array([True, False]),
    ...                            np.array([0.5, 0.5]))
    >>> record.force(np.array([False, False, True, False])).tolist()
    [True, True, True, True]
    >>> record.per_trajectory_pi().tolist()
    [0.5, 0.5, 1.0, 1.0]
    >>> record.screen(np.array([True, False, True, True]), np.array([0.5, 0.5, 1, 1])).tolist()
    [True, False, True, True]
    >>> record.per_trajectory_pi().tolist(), record.screened.tolist()
    ([0.25, 0.25, 1.0, 1.0], [False, True, False, False])
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
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
        member_pi: per trajectory, its probability of execution given its group is an
            anchor (1 without screening).
        screened: per trajectory, a member of an anchor group left unexecuted by screening.
    """

    group_ids: np.ndarray
    drawn: np.ndarray
    pi: np.ndarray
    forced: np.ndarray
    member_pi: np.ndarray | None = None
    screened: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = self.group_ids.shape
        self.member_pi = np.ones(n) if self.member_pi is None else self.member_pi
        self.screened = np.zeros(n, dtype=bool) if self.screened is None else self.screened

    @classmethod
    def draw(cls, group_ids: Any, drawn: np.ndarray, pi: np.ndarray) -> AnchorRecord:
        ids = np.array(group_ids, copy=True)
        return cls(ids, drawn.copy(), pi.astype(np.float64), np.zeros(drawn.shape, dtype=bool))

    @cached_property
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
        whole = groups.broadcast(newly)  # a forced group is executed whole
        self.member_pi[whole], self.screened[whole] = 1.0, False
        return groups.broadcast(self.anchored)

    def screen(
        self, executed: np.ndarray, member_pi: np.ndarray, known: np.ndarray | None = None
    ) -> np.ndarray:
        """Execute only the ``executed`` members of the anchor groups, each drawn with
        probability ``member_pi`` given its group (per trajectory; members of groups that are
        not anchors are ignored). ``known`` members (outcomes known without execution) are
        neither executed nor screened out; a group of known members only executes none.
        Returns the members executed, per trajectory."""
        n = self.group_ids.shape
        executed = np.asarray(executed)
        member_pi = np.asarray(member_pi, dtype=np.float64)
        if executed.dtype != bool or executed.shape != n or member_pi.shape != n:
            raise ValueError(
                f"screen_anchors needs a bool mask and member probabilities of shape {n}, "
                f"got {executed.dtype} {executed.shape} and {member_pi.shape}"
            )
        is_known = np.zeros(n, dtype=bool) if known is None else np.asarray(known)
        if is_known.dtype != bool or is_known.shape != n:
            raise ValueError(f"known must be a bool mask of shape {n}")
        if (executed & is_known).any():
            raise ValueError("a member with a known outcome is marked executed")
        anchor = self.groups.broadcast(self.anchored)
        if not ((member_pi[anchor] >= 0) & (member_pi[anchor] <= 1)).all():
            raise ValueError("member probabilities must be in [0, 1]")
        if (executed & anchor & ~(member_pi > 0)).any():
            raise ValueError("an executed member has member probability 0")
        runnable = self.groups.count(~is_known) > 0
        if ((self.groups.count(executed & anchor) == 0) & runnable)[self.anchored].any():
            raise ValueError("screening must execute at least one member of every anchor group")
        self.member_pi = np.where(anchor & ~is_known, member_pi, 1.0)
        self.screened = anchor & ~executed & ~is_known
        return anchor & executed

    def per_trajectory_pi(self) -> np.ndarray:
        """Each trajectory's probability of execution: its group's inclusion probability
        times its own given the group (0 for groups never anchored)."""
        return self.groups.broadcast(np.where(self.anchored, self.pi, 0.0)) * self.member_pi

    def matches(self, group_ids: Any) -> bool:
        other = np.asarray(group_ids)
        return other.shape == self.group_ids.shape and bool(np.all(other == self.group_ids))

    def state_dict(self) -> dict[str, Any]:
        fields = ("group_ids", "drawn", "pi", "forced", "member_pi", "screened")
        return {key: getattr(self, key).copy() for key in fields}

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> AnchorRecord:
        return cls(**{key: np.array(value) for key, value in state.items()})
