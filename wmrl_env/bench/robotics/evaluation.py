"""Success of the mean-chunk policy on fixed held-out starts, with the steps it cost.

Evaluation episodes are never charged to training: :class:`Evaluator` counts their steps
separately (``eval_steps`` of a run's records). A greedy episode is a function of the policy's
weights and its start alone, so the evaluator remembers every policy's per-start outcomes by a
fingerprint of its weights: a policy evaluated before (the seed's start in every arm, a round
that left the weights unchanged) costs no step, and one scored on the first ``k`` starts plays
only the starts it has not played yet when asked for more.

Example:
    >>> import gymnasium as gym
    >>> env = StepCounter(gym.make("MountainCarContinuous-v0"))
    >>> _ = env.reset(seed=0); _ = env.step(env.action_space.sample())
    >>> env.steps
    1
"""

from __future__ import annotations

import hashlib
from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["Evaluator", "StepCounter", "policy_fingerprint"]


class StepCounter(gym.Wrapper):
    """Counts every ``step`` played through it (:attr:`steps`)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.steps = 0

    def step(self, action: Any):
        self.steps += 1
        return self.env.step(action)


def policy_fingerprint(policy: Any) -> str:
    """A digest of what a greedy chunk depends on: the instruction and every tensor of the
    policy's backbone (weights and buffers, e.g. normalisation statistics), else of its
    ``parameters()``.

    >>> import torch
    >>> class Tiny:
    ...     def __init__(self, w): self.w = torch.nn.Parameter(torch.tensor([w]))
    ...     def parameters(self): yield self.w
    >>> one, same, other = (policy_fingerprint(Tiny(w)) for w in (1.0, 1.0, 2.0))
    >>> one == same != other
    True
    """
    backbone = getattr(policy, "backbone", None)
    tensors = backbone.state_dict().values() if backbone is not None else policy.parameters()
    digest = hashlib.sha256(str(getattr(policy, "instruction", "")).encode())
    for tensor in tensors:
        array = tensor.detach().cpu().numpy()
        digest.update(f"{array.dtype}{array.shape}".encode())
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


class Evaluator:
    """Greedy success rate on ``seeds`` in one real env of ``task`` (built lazily); the last
    evaluation's per-start outcomes in :attr:`outcomes` (for paired comparisons)."""

    def __init__(self, task: str, horizon: int, seeds: list[int]) -> None:
        self.task, self.horizon, self.seeds = task, horizon, list(seeds)
        self._env: StepCounter | None = None
        self.outcomes: list[bool] = []  # per start, of the last evaluation
        self._known: dict[str, list[bool]] = {}  # fingerprint -> outcomes of the first starts
        self.reused = 0  # evaluations answered (wholly or partly) from an earlier one

    @property
    def steps(self) -> int:
        return 0 if self._env is None else self._env.steps

    def success(self, policy: Any, starts: int | None = None) -> float:
        """Share of the first ``starts`` held-out starts (default all) the policy's mean
        chunks solve."""
        count = len(self.seeds) if starts is None else int(starts)
        if not 1 <= count <= len(self.seeds):
            raise ValueError(f"starts must be in [1, {len(self.seeds)}], got {starts}")
        key = policy_fingerprint(policy)
        known = self._known.setdefault(key, [])
        if known:
            self.reused += 1
        if len(known) < count:
            known += self._play(policy, self.seeds[len(known) : count])
        self.outcomes = known[:count]
        return float(np.mean(self.outcomes))

    def _play(self, policy: Any, seeds: list[int]) -> list[bool]:
        from wmrl_env.envs.robosuite import RobosuiteEnv
        from wmrl_env.robotics import success_on_seeds

        if self._env is None:
            env = RobosuiteEnv(
                self.task, horizon=self.horizon, reward_shaping=False, terminate_on_success=True
            )
            self._env = StepCounter(env)
        return [bool(o) for o in success_on_seeds(policy, self._env, seeds)]

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
