"""Shared helpers for the robotics tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def rollout(env: Any, actions: Sequence[np.ndarray]) -> list[tuple]:
    """Step ``env`` through ``actions``; the list of (obs, reward, terminated, truncated)."""
    return [env.step(action)[:4] for action in actions]


def assert_bitwise_equal(first: list[tuple], second: list[tuple]) -> None:
    assert len(first) == len(second)
    for step, (a, b) in enumerate(zip(first, second, strict=True)):
        for x, y in zip(a, b, strict=True):
            if isinstance(x, dict):
                for key in x:
                    assert np.array_equal(x[key], y[key]), f"step {step}: {key} differs"
            else:
                assert np.array_equal(np.asarray(x), np.asarray(y)), f"step {step}: {x!r} != {y!r}"
