"""The batch layout of a group env: ``num_groups`` groups of ``group_size`` members, contiguous.

Env ``i`` belongs to group ``i // group_size``; every member of a group shares its start.

Example:
    >>> layout = GroupLayout(num_groups=3, group_size=2)
    >>> layout.group_ids.tolist()
    [0, 0, 1, 1, 2, 2]
    >>> layout.expand(["a", "b", "c"])
    ['a', 'a', 'b', 'b', 'c', 'c']
    >>> layout.groups_of(np.array([False, True, False, False, True, True])).tolist()
    [True, False, True]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np

__all__ = ["GroupLayout"]

T = TypeVar("T")


@dataclass(frozen=True)
class GroupLayout:
    """Which env belongs to which group."""

    num_groups: int
    group_size: int
    group_ids: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        for name in ("num_groups", "group_size"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        group_ids = np.repeat(np.arange(self.num_groups), self.group_size)
        object.__setattr__(self, "group_ids", group_ids)

    @property
    def num_envs(self) -> int:
        return self.num_groups * self.group_size

    def expand(self, per_group: Sequence[T]) -> list[T]:
        """One entry per env from one entry per group."""
        return [item for item in per_group for _ in range(self.group_size)]

    def groups_of(self, per_env_mask: np.ndarray) -> np.ndarray:
        """Per group: does any of its members have ``per_env_mask`` set?"""
        return np.asarray(per_env_mask, dtype=bool).reshape(self.num_groups, -1).any(axis=1)

    def members(self, per_group_mask: np.ndarray) -> np.ndarray:
        """Per env: is its group in ``per_group_mask``?"""
        return np.repeat(np.asarray(per_group_mask, dtype=bool), self.group_size)
