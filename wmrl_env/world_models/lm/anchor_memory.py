"""A bounded memory of anchor prompts and their score-token targets, duplicates merged.

The LM scorers' online learning replays past anchors so that a LoRA step on this round's
anchors does not forget the earlier ones. A converged policy repeats a few programs; kept
naively, the repeats would fill the memory and evict the early, diverse anchors. Here a
prompt seen again is *merged*: its entry keeps the sum of its soft targets (so the target is
the mean over its executions: a program that scores 0 or 1 at random gets mass on both) and
a count. When full, the least recently executed prompt is evicted.

Example:
    >>> import numpy as np
    >>> memory = AnchorMemory(capacity=2)
    >>> keys = memory.add(["a", "b", "a"], np.eye(3)[[0, 2, 2]])
    >>> len(memory), memory.counts(keys[:2]).tolist()
    (2, [2, 1])
    >>> memory.targets(keys[:1]).tolist()          # "a": once 0, once 2 -> half each
    [[0.5, 0.0, 0.5]]
    >>> _ = memory.add(["c"], np.eye(3)[[1]])      # full: "b" (least recent) is evicted
    >>> sorted(memory.prompts(list(memory)))
    ['a', 'c']
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from wmrl_env.world_models.text import text_key

__all__ = ["AnchorMemory"]


class AnchorMemory:
    """Distinct anchor prompts with summed soft targets and counts, least recent evicted.

    Args:
        capacity: distinct prompts kept.
    """

    def __init__(self, capacity: int = 1024) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        # key -> [prompt, summed targets, count]; most recently executed last
        self._entries: OrderedDict[str, list[Any]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, prompts: Sequence[str], targets: np.ndarray) -> list[str]:
        """Merge ``prompts`` with their target rows; returns their keys (repeats included)."""
        targets = np.asarray(targets, dtype=np.float64)
        if targets.ndim != 2 or targets.shape[0] != len(prompts):
            raise ValueError(f"targets must have shape ({len(prompts)}, n), got {targets.shape}")
        if self._entries:
            width = next(iter(self._entries.values()))[1].shape[0]
            if targets.shape[1] != width:
                raise ValueError(f"targets have {targets.shape[1]} columns, the memory {width}")
        keys = [text_key(prompt) for prompt in prompts]
        for key, prompt, target in zip(keys, prompts, targets, strict=True):
            entry = self._entries.pop(key, [prompt, np.zeros_like(target), 0])
            entry[1] = entry[1] + target
            entry[2] += 1
            self._entries[key] = entry
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)
        return keys

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[str]:
        """Every key held, least recently executed first."""
        return iter(list(self._entries))

    def prompts(self, keys: Sequence[str]) -> list[str]:
        return [self._entries[key][0] for key in keys]

    def targets(self, keys: Sequence[str]) -> np.ndarray:
        """Mean soft target of each key, shape ``(len(keys), n)``."""
        return np.array([self._entries[key][1] / self._entries[key][2] for key in keys])

    def counts(self, keys: Sequence[str]) -> np.ndarray:
        return np.array([self._entries[key][2] for key in keys], dtype=np.int64)

    def state_dict(self) -> dict[str, Any]:
        """Prompts, summed targets and counts, least recently executed first."""
        keys = list(self)
        sums = [self._entries[key][1] for key in keys]
        return {
            "prompts": self.prompts(keys),
            "target_sums": np.array(sums) if sums else np.empty((0, 0)),
            "counts": self.counts(keys),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self._entries.clear()
        for prompt, sums, count in zip(
            state["prompts"], state["target_sums"], state["counts"], strict=True
        ):
            self._entries[text_key(prompt)] = [prompt, np.asarray(sums, float), int(count)]
