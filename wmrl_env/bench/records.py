"""What one benchmark run records: a row per training step, and the run's identity.

Example:
    >>> run = RunRecord(arm="wmrl", seed=0)
    >>> run.steps.append(StepRecord(step=0, real_exec_seconds=1.5, true_score=0.4))
    >>> run.final_true_score, RunRecord.from_dict(run.to_dict()) == run
    (0.4, True)
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any


@dataclass
class StepRecord:
    """One training step. Seconds are cumulative since the run started.

    ``true_score`` is the policy's held-out score (NaN when the step was not evaluated); the
    rest are the fusion's diagnostics of that step.
    """

    step: int
    real_exec_seconds: float = 0.0
    wall_seconds: float = 0.0
    wm_seconds: float = 0.0
    real_executions: int = 0
    real_steps: int = 0
    """cumulative real environment steps (simulators; 0 where a run has no such notion)"""
    eval_steps: int = 0
    """cumulative environment steps spent evaluating (never charged to training)"""
    true_score: float = math.nan
    best_executed_score: float = math.nan
    """mean over tasks of the best program executed so far (per-task regime)"""
    fused_reward_mean: float = math.nan
    real_reward_mean: float = math.nan
    kappa: float = math.nan
    spearman: float = math.nan
    residual_mse: float = math.nan
    anchor_gap: float = math.nan
    wm_weight: float = math.nan
    n_anchor_groups: int = 0
    n_failed: int = 0
    calibration_fallback: str | None = None


@dataclass
class RunRecord:
    """One arm trained with one seed."""

    arm: str
    seed: int
    steps: list[StepRecord] = field(default_factory=list)
    calibration: dict[str, list[float]] = field(default_factory=dict)
    """the final calibration map on a grid and the window's anchor pairs (for plots)"""
    final_programs: dict[str, str] = field(default_factory=dict)
    """held-out task -> the final policy's most likely program id"""
    task_scores: dict[str, list[float]] = field(default_factory=dict)
    """reading (e.g. ``"greedy@exec16"``) -> per held-out task score (per-task regime)"""

    @property
    def evaluated(self) -> list[StepRecord]:
        return [s for s in self.steps if not math.isnan(s.true_score)]

    @property
    def final_true_score(self) -> float:
        evaluated = self.evaluated
        return evaluated[-1].true_score if evaluated else math.nan

    @property
    def totals(self) -> StepRecord:
        return self.steps[-1] if self.steps else StepRecord(step=-1)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunRecord:
        names = {f.name for f in fields(StepRecord)}
        steps = [StepRecord(**{k: v for k, v in s.items() if k in names}) for s in data["steps"]]
        return cls(
            data["arm"],
            data["seed"],
            steps,
            data.get("calibration", {}),
            data.get("final_programs", {}),
            data.get("task_scores", {}),
        )
