"""What every round of a group env shares: its setup and its finish.

A *round* is one GRPO batch: ``reset()`` starts it (group starts drawn, anchor groups chosen),
``step()`` plays it, and when the last episode ends the fusion turns the round's world-model and
real scores into rewards and advantages. :class:`~wmrl_env.wrappers.outcome.OutcomeRound` and
:class:`~wmrl_env.wrappers.dynamics.DynamicsRound` implement ``step`` for the two kinds of task;
planning, the real record, the breaker and the fusion are the anchored round's engine
(:class:`~wmrl_env.rounds.AnchoredRound`).
"""

from __future__ import annotations

import abc
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from wmrl_env.env_executors.gym_env import GymEnvExecutor
from wmrl_env.fusion import RewardFusion
from wmrl_env.rounds.engine import AnchoredRound
from wmrl_env.rounds.health import InfrastructureFailureError, InfrastructureHealth
from wmrl_env.rounds.plan import AnchorSelection, RoundPlan
from wmrl_env.rounds.record import NOT_EXECUTED, RealRecord
from wmrl_env.world_models.base import AnyWorldModel, Prediction
from wmrl_env.wrappers.groups import GroupLayout
from wmrl_env.wrappers.info import add_batch, add_per_env
from wmrl_env.wrappers.starts import GroupStarts

__all__ = [
    "NOT_EXECUTED",
    "AnchorSelection",
    "InfrastructureFailureError",
    "InfrastructureHealth",
    "RealRecord",
    "Round",
    "RoundSetup",
    "StepOutput",
]


@dataclass
class RoundSetup:
    """Everything a round needs, fixed at ``reset``."""

    layout: GroupLayout
    starts: GroupStarts
    anchors: np.ndarray | None  # per env, chosen by the fusion at reset; None: at step
    executor: GymEnvExecutor
    world_model: AnyWorldModel
    engine: AnchoredRound  # plans and finishes the round (fusion, breaker, failure_score)
    score_range: tuple[float, float] | None = None
    failed_reward: float = math.nan
    known_failure: Callable[[Any], bool] | None = None  # outcome tasks: fails without a run

    @property
    def fusion(self) -> RewardFusion:
        return self.engine.fusion

    @property
    def selection(self) -> AnchorSelection:
        return self.engine.selection


@dataclass
class StepOutput:
    """One ``step`` of a round, per env (observations unbatched)."""

    observations: list[Any]
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    info: dict[str, Any] = field(default_factory=dict)


class Round(abc.ABC):
    """One GRPO batch in progress; subclasses play its steps."""

    def __init__(self, setup: RoundSetup) -> None:
        self.setup = setup
        n = setup.layout.num_envs
        self.real: RealRecord = setup.engine.record(n)
        self.anchors = setup.anchors  # the drawn anchors (an outcome round may draw at step)
        self.plan: RoundPlan | None = None  # what the round executes, once planned
        self.done = False
        self.start_mismatches = 0

    @abc.abstractmethod
    def step(self, actions: list[Any]) -> StepOutput: ...

    def fuse(self, prediction: Prediction, info: dict[str, Any]) -> np.ndarray:
        """End the round: fuse the scores, fill ``info``, return the rewards to hand out.
        ``prediction``: the world model's scores, validity and std (the gate's weighted
        least squares)."""
        setup, real = self.setup, self.real
        finished = setup.engine.finish(self.plan, real, prediction, self.clusters())
        out = finished.fusion
        self.done = True
        add_per_env(
            info,
            wm_score=prediction.scores,
            wm_valid=prediction.valid,
            calibrated_score=out.calibrated,
            real_score=real.score,
            is_anchor=out.is_anchor,
            weight=out.weights,
            advantage=out.advantages,
            fused_reward=out.rewards,
            inclusion_probability=out.inclusion,
            program_failed=real.program_failed.copy(),
        )
        add_batch(
            info, setup.layout.num_envs, **finished.metrics, start_mismatches=self.start_mismatches
        )
        return np.where(real.failed, setup.failed_reward, out.rewards)

    def clusters(self) -> list[Any] | None:
        """Per env, its group's task for the fusion's gate: the reset info's ``task_id``, else
        a discrete context (an int or str observation); ``None`` (each group its own cluster)
        when a group has neither."""
        labels = []
        starts = self.setup.starts
        for observation, info in zip(starts.observations, starts.infos, strict=True):
            task = (info or {}).get("task_id")
            if task is None and isinstance(observation, (int, str, np.integer, np.str_)):
                task = observation
            if task is None:
                return None
            labels.append(task.item() if isinstance(task, np.generic) else task)
        return self.setup.layout.expand(labels)

    def real_info(self, info: dict[str, Any]) -> None:
        """Per-env execution status so far (``exec_status``, messages, seconds)."""
        add_per_env(
            info,
            exec_status=self.real.status.copy(),
            exec_message=self.real.message.copy(),
            exec_seconds=self.real.seconds.copy(),
        )
