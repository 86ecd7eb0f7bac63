"""What every round of a group env shares: its setup, the real-execution record, the fusion.

A *round* is one GRPO batch: ``reset()`` starts it (group starts drawn, anchor groups chosen),
``step()`` plays it, and when the last episode ends the fusion turns the round's world-model and
real scores into rewards and advantages. :class:`~wmrl_env.wrappers.outcome.OutcomeRound` and
:class:`~wmrl_env.wrappers.dynamics.DynamicsRound` implement ``step`` for the two kinds of task.
"""

from __future__ import annotations

import abc
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from wmrl_env.env_executors.gym_env import GymEnvExecutor
from wmrl_env.executors.base import ExecResult
from wmrl_env.fusion import RewardFusion
from wmrl_env.rounds.health import InfrastructureFailureError, InfrastructureHealth
from wmrl_env.world_models.base import AnyWorldModel
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

NOT_EXECUTED = "not_executed"


@dataclass
class AnchorSelection:
    """How an outcome round picks what to execute from its prediction (see
    :class:`~wmrl_env.wrappers.vector.WorldModelVectorEnv`'s ``anchor_priority``,
    ``ucb_kappa``, ``execute_per_group`` and ``screening``)."""

    priority: str = "uniform"
    ucb_kappa: float = 1.0
    reference: np.ndarray | None = None  # per env: best real score of its context so far
    execute_per_group: int | None = None
    screening: str = "pps"
    rng: np.random.Generator | None = None  # the screening draw's


@dataclass
class RoundSetup:
    """Everything a round needs, fixed at ``reset``."""

    layout: GroupLayout
    starts: GroupStarts
    anchors: np.ndarray | None  # per env, chosen by the fusion at reset; None: at step
    executor: GymEnvExecutor
    world_model: AnyWorldModel
    fusion: RewardFusion
    score_range: tuple[float, float] | None = None
    failed_reward: float = math.nan
    failure_score: float = math.nan  # a program failure's real score (NaN: left out)
    health: InfrastructureHealth | None = None
    selection: AnchorSelection = field(default_factory=AnchorSelection)
    known_failure: Callable[[Any], bool] | None = None  # outcome tasks: fails without a run


@dataclass
class StepOutput:
    """One ``step`` of a round, per env (observations unbatched)."""

    observations: list[Any]
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    info: dict[str, Any] = field(default_factory=dict)


class RealRecord:
    """Per env: the real score (sum of real rewards), failure, status and seconds so far.

    A program failure (crash, timeout, out of memory, invalid output) is an outcome: the
    episode's real score is ``failure_score`` (``program_failed``). An infrastructure failure
    (``error``: the env raised, a worker died) is missing data: ``failed``, score NaN. With a
    NaN ``failure_score`` program failures are left out like infrastructure ones.
    """

    def __init__(
        self,
        num_envs: int,
        failure_score: float = math.nan,
        health: InfrastructureHealth | None = None,
    ) -> None:
        self.failure_score = float(failure_score)
        self.health = health
        self.score = np.full(num_envs, np.nan)
        self.failed = np.zeros(num_envs, dtype=bool)
        self.program_failed = np.zeros(num_envs, dtype=bool)
        self.status = np.full(num_envs, NOT_EXECUTED, dtype="<U16")
        self.message = np.full(num_envs, "", dtype=object)
        self.seconds = np.zeros(num_envs)

    def add(self, index: int, result: ExecResult) -> None:
        """Fold in a real job played by env ``index`` (one job per step in multi-step tasks)."""
        self.status[index] = result.status.value
        self.seconds[index] += result.exec_seconds
        if self.failed[index] or self.program_failed[index]:
            return
        if result.status.is_program_failure and not math.isnan(self.failure_score):
            self.program_failed[index] = True
            self.score[index] = self.failure_score
            self.message[index] = result.message
            return
        if not result.ok:
            if result.status.is_program_failure:
                warnings.warn(
                    f"a program failure ({result.status.value}) is left out of the rewards: "
                    "pass failure_score (or score_range) so that failures are scored as failures",
                    stacklevel=2,
                )
            self.failed[index] = True
            self.score[index] = np.nan
            self.message[index] = result.message
            return
        played = math.fsum(result.metadata.get("rewards", ()))
        self.score[index] = played if np.isnan(self.score[index]) else self.score[index] + played

    def add_all(self, indices: Sequence[int], results: Sequence[ExecResult]) -> None:
        for index, result in zip(indices, results, strict=True):
            self.add(index, result)
        if self.health is not None:
            self.health.record(results)


class Round(abc.ABC):
    """One GRPO batch in progress; subclasses play its steps."""

    def __init__(self, setup: RoundSetup) -> None:
        self.setup = setup
        n = setup.layout.num_envs
        self.real = RealRecord(n, setup.failure_score, setup.health)
        self.anchors = setup.anchors  # the drawn anchors (an outcome round may draw at step)
        self.done = False
        self.start_mismatches = 0

    @abc.abstractmethod
    def step(self, actions: list[Any]) -> StepOutput: ...

    def force_groups(self, groups: np.ndarray) -> None:
        """Anchor ``groups`` (per-group mask) with certainty: the fusion records ``pi = 1``."""
        self.setup.fusion.force_anchors(self.setup.layout.members(groups))

    def fuse(
        self,
        wm_scores: np.ndarray,
        wm_valid: np.ndarray,
        info: dict[str, Any],
        wm_std: np.ndarray | None = None,
        known_scores: np.ndarray | None = None,
    ) -> np.ndarray:
        """End the round: fuse the scores, fill ``info``, return the rewards to hand out.
        ``wm_std``: the world model's predictive std (the gate's weighted least squares);
        ``known_scores``: outcomes known without execution (NaN elsewhere)."""
        setup, real = self.setup, self.real
        out = setup.fusion.step(
            setup.layout.group_ids,
            np.where(wm_valid, wm_scores, np.nan),
            real.score,
            failed=real.failed,
            wm_valid=wm_valid,
            clusters=self.clusters(),
            wm_std=wm_std,
            known_scores=known_scores,
        )
        self.done = True
        add_per_env(
            info,
            wm_score=wm_scores,
            wm_valid=wm_valid,
            calibrated_score=out.calibrated,
            real_score=real.score,
            is_anchor=out.is_anchor,
            weight=out.weights,
            advantage=out.advantages,
            fused_reward=out.rewards,
            inclusion_probability=out.inclusion,
            program_failed=real.program_failed.copy(),
        )
        metrics = {key: value for key, value in out.metrics.items() if np.ndim(value) == 0}
        metrics["kappa"] = out.kappa
        add_batch(
            info,
            setup.layout.num_envs,
            **metrics,
            n_forced_anchor_groups=int(setup.layout.groups_of(out.is_anchor & ~self.anchors).sum()),
            n_program_failures=int(real.program_failed.sum()),
            start_mismatches=self.start_mismatches,
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
