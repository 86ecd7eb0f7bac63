"""How an anchored round ends: the fusion turns the world-model scores, the real record and
the known outcomes into rewards and advantages (:func:`finish_round`), and the round's
metrics come back under the names in :data:`ROUND_METRICS`, alike in every adapter
(:func:`round_metrics`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from wmrl_env.fusion import FusionOutput, RewardFusion
from wmrl_env.rounds.plan import RoundPlan
from wmrl_env.rounds.record import RealRecord
from wmrl_env.world_models.base import Prediction

__all__ = ["ROUND_METRICS", "FinishedRound", "finish_round", "prediction_valid", "round_metrics"]

# the round's own metrics, beside the fusion's (FusionOutput.metrics), reported alike by every
# adapter: real executions, forced groups (run for real without being drawn because they hold
# an invalid prediction whose outcome is not known: executed whole as pi = 1 anchors, or in
# verl's per-sample round the invalid sample alone as a known outcome), members left out by
# screening, program and infrastructure failures, the share of valid predictions
ROUND_METRICS: tuple[str, ...] = (
    "n_executed",
    "n_forced_anchor_groups",
    "n_screened",
    "n_program_failures",
    "n_infrastructure_failures",
    "wm_valid_fraction",
)


@dataclass(frozen=True)
class FinishedRound:
    """A finished round: the fusion's output and the metrics (the fusion's numeric ones and
    :data:`ROUND_METRICS`)."""

    plan: RoundPlan
    record: RealRecord
    fusion: FusionOutput
    metrics: dict[str, Any]


def finish_round(
    fusion: RewardFusion,
    plan: RoundPlan,
    record: RealRecord,
    prediction: Prediction | None,
    clusters: Sequence[Any] | np.ndarray | None = None,
    failure_score: float = math.nan,
) -> FinishedRound:
    """Fuse the round: world-model scores (invalid ones left out), real scores, known
    outcomes (``plan.known_scores``, else ``failure_score``, a failed program's score), the
    groups' tasks (``clusters``, per sample) and the world model's std go to
    :meth:`RewardFusion.step`; a plan decided outside the fusion brings its inclusion
    probabilities and screened members. ``prediction`` ``None``: a round without a
    world model (method ``"real"``)."""
    n = len(plan.group_ids)
    valid = np.ones(n, dtype=bool) if prediction is None else prediction_valid(prediction)
    known_scores = plan.known_scores
    if known_scores is None:
        known_scores = np.where(plan.known, failure_score, np.nan)
    outside: dict[str, Any] = {}
    if plan.decided_outside:
        outside = {"inclusion_probabilities": plan.inclusion, "screened": plan.screened}
    out = fusion.step(
        plan.group_ids,
        None if prediction is None else np.where(valid, prediction.scores, np.nan),
        record.score,
        failed=record.failed,
        wm_valid=valid,
        clusters=clusters,
        wm_std=None if prediction is None else prediction.std,
        known_scores=known_scores,
        **outside,
    )
    metrics = round_metrics(out, plan, record, valid)
    return FinishedRound(plan, record, out, metrics)


def round_metrics(
    out: FusionOutput, plan: RoundPlan, record: RealRecord, valid: np.ndarray
) -> dict[str, Any]:
    """The fusion's numeric metrics (and ``kappa``) with :data:`ROUND_METRICS`."""
    metrics: dict[str, Any] = {
        key: value for key, value in out.metrics.items() if np.ndim(value) == 0
    }
    metrics["kappa"] = out.kappa
    metrics.update(
        n_executed=int(record.executed.sum()),
        n_forced_anchor_groups=plan.n_forced_groups,
        n_screened=int(plan.screened.sum()),
        n_program_failures=int(record.program_failed.sum()),
        n_infrastructure_failures=int(record.failed.sum()),
        wm_valid_fraction=float(np.mean(valid)) if len(valid) else 1.0,
    )
    return metrics


def prediction_valid(prediction: Prediction) -> np.ndarray:
    """Per sample: the world model's prediction is valid (its ``valid`` mask, else finite)."""
    if prediction.valid is None:
        return np.isfinite(prediction.scores)
    return np.asarray(prediction.valid, dtype=bool)
