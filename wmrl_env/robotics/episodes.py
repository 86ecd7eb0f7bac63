"""The states a chunk policy's sampled episodes visit, in groups from shared starts.

:func:`sampled_groups` plays ``group_size`` sampled episodes from each start seed (the
chunks GRPO would sample: ``policy.act``) and keeps each episode's chunk-level states, so a
progress model (:mod:`wmrl_env.robotics.progress`) can score them and learn from them.

Example:
    >>> import gymnasium as gym, numpy as np
    >>> class Still:  # a chunk policy that never moves
    ...     instruction = ""
    ...     def __call__(self, observations, instructions):
    ...         return np.zeros((len(observations), 2, 1), np.float32)
    ...     def act(self, observations):
    ...         return self(observations, [""]), None
    >>> env = gym.make("MountainCarContinuous-v0", max_episode_steps=10)
    >>> episodes, groups = sampled_groups(Still(), env, seeds=[0, 1], group_size=2)
    >>> [states.shape for states, _ in episodes][:1], groups.tolist()
    ([(6, 2)], [0, 0, 1, 1])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from wmrl_env.integrations.vla import ActionChunking

__all__ = ["sampled_groups"]


def sampled_groups(
    policy: Any, env: gym.Env, seeds: Sequence[int], group_size: int
) -> tuple[list[tuple[np.ndarray, bool]], np.ndarray]:
    """``(episodes, group ids)``: per episode its ``(states, succeeded)`` (the chunk-level
    states from the start to the last, ``(L + 1, obs_dim)``), ``group_size`` episodes per
    start seed, the policy's own exploration noise (its generator, not re-seeded). Success is
    ``info["success"]`` at any step; actions are clipped to the action space."""
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    instructions = [getattr(policy, "instruction", "")]
    probe = policy(np.zeros((1, *env.observation_space.shape), np.float32), instructions)
    chunked = ActionChunking(env, chunk_size=probe.shape[1])
    low, high = env.action_space.low, env.action_space.high
    episodes, groups = [], []
    for group, seed in enumerate(seeds):
        for _ in range(group_size):
            observation, _ = chunked.reset(seed=int(seed))
            states, over, succeeded = [np.asarray(observation, np.float64)], False, False
            while not over:
                chunk = policy.act(observation[None].astype(np.float32))[0][0]
                observation, _, terminated, truncated, info = chunked.step(
                    np.clip(chunk, low, high).astype(env.action_space.dtype)
                )
                states.append(np.asarray(observation, np.float64))
                succeeded |= bool(info.get("success", False))
                over = terminated or truncated
            episodes.append((np.stack(states), succeeded))
            groups.append(group)
    return episodes, np.asarray(groups, np.int64)
