"""What every round of a group env shares: its setup, the real-execution record, the fusion.

A *round* is one GRPO batch: ``reset()`` starts it (group starts drawn, anchor groups chosen),
``step()`` plays it, and when the last episode ends the fusion turns the round's world-model and
real scores into rewards and advantages. :class:`~wmrl_env.wrappers.outcome.OutcomeRound` and
:class:`~wmrl_env.wrappers.dynamics.DynamicsRound` implement ``step`` for the two kinds of task.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from wmrl_env.env_executors.gym_env import GymEnvExecutor
from wmrl_env.executors.base import ExecResult
from wmrl_env.wrappers.groups import GroupLayout
from wmrl_env.wrappers.info import add_batch, add_per_env
from wmrl_env.wrappers.starts import GroupStarts

__all__ = ["NOT_EXECUTED", "RealRecord", "Round", "RoundSetup", "StepOutput"]

NOT_EXECUTED = "not_executed"


@dataclass
class RoundSetup:
    """Everything a round needs, fixed at ``reset``."""

    layout: GroupLayout
    starts: GroupStarts
    anchors: np.ndarray | None  # per env, chosen by the fusion at reset; None: at step
    executor: GymEnvExecutor
    world_model: Any
    fusion: Any
    score_range: tuple[float, float] | None = None
    failed_reward: float = math.nan


@dataclass
class StepOutput:
    """One ``step`` of a round, per env (observations unbatched)."""

    observations: list[Any]
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    info: dict[str, Any] = field(default_factory=dict)


class RealRecord:
    """Per env: the real score (sum of real rewards), failure, status and seconds so far."""

    def __init__(self, num_envs: int) -> None:
        self.score = np.full(num_envs, np.nan)
        self.failed = np.zeros(num_envs, dtype=bool)
        self.status = np.full(num_envs, NOT_EXECUTED, dtype="<U16")
        self.message = np.full(num_envs, "", dtype=object)
        self.seconds = np.zeros(num_envs)

    def add(self, index: int, result: ExecResult) -> None:
        """Fold in a real job played by env ``index`` (one job per step in multi-step tasks)."""
        self.status[index] = result.status.value
        self.seconds[index] += result.exec_seconds
        if self.failed[index]:
            return
        if not result.ok:
            self.failed[index] = True
            self.score[index] = np.nan
            self.message[index] = result.message
            return
        played = math.fsum(result.metadata.get("rewards", ()))
        self.score[index] = played if np.isnan(self.score[index]) else self.score[index] + played

    def add_all(self, indices: Sequence[int], results: Sequence[ExecResult]) -> None:
        for index, result in zip(indices, results, strict=True):
            self.add(index, result)


class Round(abc.ABC):
    """One GRPO batch in progress; subclasses play its steps."""

    def __init__(self, setup: RoundSetup) -> None:
        self.setup = setup
        n = setup.layout.num_envs
        self.real = RealRecord(n)
        self.anchors = setup.anchors  # the drawn anchors (an outcome round may draw at step)
        self.done = False
        self.start_mismatches = 0

    @abc.abstractmethod
    def step(self, actions: list[Any]) -> StepOutput: ...

    def force_groups(self, groups: np.ndarray) -> None:
        """Anchor ``groups`` (per-group mask) with certainty: the fusion records ``pi = 1``."""
        self.setup.fusion.force_anchors(self.setup.layout.members(groups))

    def fuse(self, wm_scores: np.ndarray, wm_valid: np.ndarray, info: dict[str, Any]) -> np.ndarray:
        """End the round: fuse the scores, fill ``info``, return the rewards to hand out."""
        setup, real = self.setup, self.real
        out = setup.fusion.step(
            setup.layout.group_ids,
            np.where(wm_valid, wm_scores, np.nan),
            real.score,
            failed=real.failed,
            wm_valid=wm_valid,
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
        )
        metrics = {key: value for key, value in out.metrics.items() if np.ndim(value) == 0}
        metrics["kappa"] = out.kappa
        add_batch(
            info,
            setup.layout.num_envs,
            **metrics,
            n_forced_anchor_groups=int(setup.layout.groups_of(out.is_anchor & ~self.anchors).sum()),
            start_mismatches=self.start_mismatches,
        )
        return np.where(real.failed, setup.failed_reward, out.rewards)

    def real_info(self, info: dict[str, Any]) -> None:
        """Per-env execution status so far (``exec_status``, messages, seconds)."""
        add_per_env(
            info,
            exec_status=self.real.status.copy(),
            exec_message=self.real.message.copy(),
            exec_seconds=self.real.seconds.copy(),
        )
