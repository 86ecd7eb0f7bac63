"""The checks every step of a robosuite-based environment makes before touching the simulator.

Example:
    >>> import gymnasium as gym, numpy as np
    >>> space = gym.spaces.Box(-1, 1, (2,), np.float32)
    >>> checked_action([0.5, 0.0], space, episode_over=False)
    array([0.5, 0. ])
    >>> checked_action([0.5], space, episode_over=False)
    Traceback (most recent call last):
    ...
    ValueError: action has shape (1,), expected (2,)
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["checked_action"]


def checked_action(action: Any, space: gym.spaces.Box, episode_over: bool) -> np.ndarray:
    """``action`` as float64, after checking the episode is running and the action is usable.

    Raises ``RuntimeError`` after the episode ended, ``ValueError`` on a wrong shape, NaN or
    inf. Nothing is sent to the simulator in those cases.
    """
    if episode_over:
        raise RuntimeError("step() called on a finished episode: call reset() first")
    action = np.asarray(action, dtype=np.float64)
    if action.shape != space.shape:
        raise ValueError(f"action has shape {action.shape}, expected {space.shape}")
    if not np.isfinite(action).all():
        raise ValueError("action contains NaN or inf")
    return action
