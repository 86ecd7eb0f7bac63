"""One episode of the single-env wrapper: an anchored round of one sample, its real steps
folded into a :class:`~wmrl_env.rounds.RealRecord` (which tells the circuit breaker)."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import gymnasium as gym

from wmrl_env.executors.base import ExecResult, ExecStatus
from wmrl_env.rounds import RealRecord

__all__ = ["Episode", "RealStep"]


class RealStep(NamedTuple):
    """One step of the real env, or how it failed (``status``)."""

    observation: Any
    reward: float
    terminated: bool
    truncated: bool
    status: str
    info: dict[str, Any]


class Episode:
    """The state of the episode in progress."""

    def __init__(self, start: Any, is_anchor: bool, record: RealRecord) -> None:
        self.start = start
        self.is_anchor = is_anchor
        self.record = record  # the real steps, folded (score, failure, status)
        self.model_observation = start
        self.model_active = True
        self.wm_valid = True
        self.wm_return = 0.0
        self.wm_std = math.nan
        self.known = False  # known to fail without running (never executed)
        self.paid = 0.0  # world-model rewards already handed out this episode
        self.steps = 0
        self.actions: list[Any] = []
        self.executed = is_anchor  # played in the real env (an anchor, or sent there)
        self.done = False

    @property
    def forced(self) -> bool:
        """Executed with certainty because its prediction was invalid, not drawn."""
        return self.executed and not self.is_anchor

    def real_step(self, env: gym.Env, action: Any) -> RealStep:
        """Step the real env and fold the step into the real record; a failure becomes a
        status, never an exception of the env's (the breaker may raise)."""
        try:
            observation, reward, terminated, truncated, info = env.step(action)
        except Exception as error:
            return self._failed(ExecStatus.ERROR, f"step raised {type(error).__name__}: {error}")
        reward = float(reward)
        if not math.isfinite(reward):
            return self._failed(ExecStatus.INVALID_OUTPUT, f"step returned reward {reward}")
        played = ExecResult("episode", ExecStatus.OK, score=reward, metadata={"rewards": (reward,)})
        self.record.add_all([0], [played])
        return RealStep(observation, reward, bool(terminated), bool(truncated), "ok", info)

    def replay(self, env: gym.Env) -> None:
        """Play the imagined episode's actions in the real env from its start, open loop."""
        for action in self.actions:
            real = self.real_step(env, action)
            if real.status != "ok" or real.terminated or real.truncated:
                return

    def round_metrics(self) -> dict[str, Any]:
        """The anchored round's metrics for this episode, named as every adapter names them
        (:data:`~wmrl_env.rounds.ROUND_METRICS`)."""
        record = self.record
        return {
            "n_executed": int(record.executed[0]),
            "n_forced_anchor_groups": int(self.forced),
            "n_screened": 0,
            "n_program_failures": int(record.program_failed[0]),
            "n_infrastructure_failures": int(record.failed[0]),
            "wm_valid_fraction": float(self.wm_valid),
        }

    def _failed(self, status: ExecStatus, message: str) -> RealStep:
        """End the real episode: a program failure scores the failure score, an
        infrastructure failure (or a program failure without one) is missing (NaN)."""
        self.record.add_all([0], [ExecResult("episode", status, message=message)])
        info = {"exec_message": message}
        return RealStep(self.model_observation, math.nan, False, True, status.value, info)
