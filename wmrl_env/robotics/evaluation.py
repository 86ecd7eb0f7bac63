"""Success rate of a chunk policy on seeded starts of a real environment.

Example:
    >>> import gymnasium as gym, numpy as np
    >>> class Still:  # a VLAPolicy that never moves
    ...     instruction = ""
    ...     def __call__(self, observations, instructions):
    ...         return np.zeros((len(observations), 2, 1), np.float32)
    >>> env = gym.make("MountainCarContinuous-v0", max_episode_steps=10)
    >>> success_on_seeds(Still(), env, seeds=[0, 1]).tolist()
    [False, False]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from wmrl_env.integrations.vla import ActionChunking

__all__ = ["success_on_seeds"]


def success_on_seeds(
    policy: Any,
    env: gym.Env,
    seeds: Sequence[int],
    sampled: bool = False,
    noise_seeds: Sequence[int] | None = None,
) -> np.ndarray:
    """Did each episode ``env.reset(seed=s)``, played by ``policy``'s chunks, succeed?

    Greedy (``sampled=False``): the policy's mean chunk (``policy(obs, [instruction])``).
    Sampled: ``policy.act(obs)``, the chunk GRPO would sample, with the exploration noise
    re-seeded from each episode's seed, or from ``noise_seeds`` (one per episode: other tries
    from the same starts); the policy's generator is restored afterwards.
    Actions are clipped to the action space. Success is ``info["success"]`` at any step, or a
    ``terminated`` step when the env reports no success flag. Returns ``(len(seeds),)`` bool.
    """
    instructions = [getattr(policy, "instruction", "")]
    probe = policy(np.zeros((1, *env.observation_space.shape), np.float32), instructions)
    chunked = ActionChunking(env, chunk_size=probe.shape[1])
    low, high = env.action_space.low, env.action_space.high
    noise_seeds = seeds if noise_seeds is None else noise_seeds
    if len(noise_seeds) != len(seeds):
        raise ValueError(f"{len(noise_seeds)} noise seeds for {len(seeds)} episodes")
    saved = policy.generator.get_state() if sampled else None
    outcomes = []
    try:
        for seed, noise_seed in zip(seeds, noise_seeds, strict=True):
            observation, _ = chunked.reset(seed=int(seed))
            if sampled:
                policy.generator.manual_seed(int(noise_seed))
            over = succeeded = False
            while not over:
                batch = observation[None].astype(np.float32)
                chunk = policy.act(batch)[0][0] if sampled else policy(batch, instructions)[0]
                observation, _, terminated, truncated, info = chunked.step(
                    np.clip(chunk, low, high).astype(env.action_space.dtype)
                )
                succeeded |= bool(info.get("success", terminated))
                over = terminated or truncated
            outcomes.append(succeeded)
    finally:
        if saved is not None:
            policy.generator.set_state(saved)
    return np.asarray(outcomes, bool)
