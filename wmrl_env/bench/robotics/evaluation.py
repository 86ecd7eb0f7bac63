"""Success of the mean-chunk policy on fixed held-out starts, with the steps it cost.

Evaluation episodes are never charged to training: :class:`Evaluator` counts their steps
separately (``eval_steps`` of a run's records).

Example:
    >>> import gymnasium as gym
    >>> env = StepCounter(gym.make("MountainCarContinuous-v0"))
    >>> _ = env.reset(seed=0); _ = env.step(env.action_space.sample())
    >>> env.steps
    1
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

__all__ = ["Evaluator", "StepCounter"]


class StepCounter(gym.Wrapper):
    """Counts every ``step`` played through it (:attr:`steps`)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.steps = 0

    def step(self, action: Any):
        self.steps += 1
        return self.env.step(action)


class Evaluator:
    """Greedy success rate on ``seeds`` in one real env of ``task`` (built lazily); the last
    evaluation's per-start outcomes in :attr:`outcomes` (for paired comparisons)."""

    def __init__(self, task: str, horizon: int, seeds: list[int]) -> None:
        self.task, self.horizon, self.seeds = task, horizon, list(seeds)
        self._env: StepCounter | None = None
        self.outcomes: list[bool] = []  # per start, of the last evaluation

    @property
    def steps(self) -> int:
        return 0 if self._env is None else self._env.steps

    def success(self, policy: Any) -> float:
        """Share of the held-out starts the policy's mean chunks solve."""
        from wmrl_env.envs.robosuite import RobosuiteEnv
        from wmrl_env.robotics import success_on_seeds

        if self._env is None:
            env = RobosuiteEnv(
                self.task, horizon=self.horizon, reward_shaping=False, terminate_on_success=True
            )
            self._env = StepCounter(env)
        outcomes = success_on_seeds(policy, self._env, self.seeds)
        self.outcomes = [bool(o) for o in outcomes]
        return float(outcomes.mean())

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
