"""Demonstrations as the world model sees them: chunk-level transitions and success labels.

A chunk policy moves the world one chunk per step, so the dynamics ensemble learns
``(state, chunk) -> state after the chunk``. :func:`chunk_transitions` cuts per-step
demonstrations (``observations``, ``actions``, ``next_observations``, ``successes``,
``episode``: the arrays of :class:`wmrl_env.robotics.demonstrations.Demonstrations`) into
chunks aligned with each episode's start, as the policy plays them; the binary reward of a
chunk is 1 when the task first succeeds within it, and the episode ends there (the bench's
env terminates on success). A last partial chunk repeats its last action.

Example:
    >>> import numpy as np
    >>> from types import SimpleNamespace
    >>> demos = SimpleNamespace(
    ...     observations=np.arange(5.0)[:, None], actions=np.ones((5, 2)),
    ...     next_observations=np.arange(1.0, 6.0)[:, None],
    ...     successes=np.array([False, False, True, True, False]), episode=np.zeros(5, int))
    >>> chunks = chunk_transitions(demos, chunk_size=2)
    >>> chunks.observations[:, 0].tolist(), chunks.next_observations[:, 0].tolist()
    ([0.0, 2.0], [2.0, 3.0])
    >>> chunks.rewards
    array([0., 1.])
    >>> chunks.actions.shape, chunks.terminations
    ((2, 2, 2), array([False,  True]))
"""

from __future__ import annotations

from typing import Any

import numpy as np

from wmrl_env.grpo.transitions import Transitions

__all__ = ["chunk_transitions", "episode_ids"]


def episode_ids(demos: Any) -> np.ndarray:
    """The distinct episode indices of per-step demonstrations, in order."""
    return np.unique(np.asarray(demos.episode))


def chunk_transitions(
    demos: Any, chunk_size: int, episodes: np.ndarray | None = None
) -> Transitions:
    """Chunk-level transitions of ``demos`` (only ``episodes`` when given); see the module."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    episode = np.asarray(demos.episode)
    chosen = episode_ids(demos) if episodes is None else np.asarray(episodes)
    rows: dict[str, list] = {k: [] for k in ("obs", "act", "next", "rew", "term")}
    for index in chosen:
        steps = np.flatnonzero(episode == index)
        for begin in range(0, len(steps), chunk_size):
            part = steps[begin : begin + chunk_size]
            success = np.asarray(demos.successes)[part]
            if success.any():
                part = part[: int(np.argmax(success)) + 1]
            actions = np.asarray(demos.actions)[part]
            padding = np.repeat(actions[-1:], chunk_size - len(actions), axis=0)
            rows["obs"].append(np.asarray(demos.observations)[part[0]])
            rows["act"].append(np.concatenate([actions, padding]))
            rows["next"].append(np.asarray(demos.next_observations)[part[-1]])
            rows["rew"].append(float(success.any()))
            rows["term"].append(bool(success.any()))
            if success.any():
                break
    if not rows["obs"]:
        raise ValueError("the demonstrations hold no steps")
    return Transitions(
        observations=np.stack(rows["obs"]).astype(np.float32),
        actions=np.stack(rows["act"]).astype(np.float32),
        next_observations=np.stack(rows["next"]).astype(np.float32),
        rewards=np.asarray(rows["rew"]),
        terminations=np.asarray(rows["term"]),
    )
