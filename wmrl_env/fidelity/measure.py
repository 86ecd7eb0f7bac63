"""Measure a world model against held-out real executions: the fidelity report's figures.

:func:`measure` asks the world model for its prediction contract on every execution
(``predict_outcomes``), optionally after teaching it ``anchor_groups`` groups of each task's
executions first (what a training run's anchors give it; those executions are then left out
of the figures), and returns the figures as plain data: status accuracy, failure AUC and
calibration, score MAE, +-1 / +-2 std coverage and calibration error, within-group Spearman
of the expected reward on groups of ``group_size`` as GRPO forms them, the noise ceiling
where programs ran more than once, and the saving the bench's quality curve predicts at that
Spearman.

Example:
    >>> from wmrl_env.fidelity.cases import suite_cases
    >>> from wmrl_env.world_models import load_default_ml_world_model
    >>> result = measure(load_default_ml_world_model(), suite_cases(tasks=["wine", "iris"]))
    >>> result.figures["status"]["accuracy"] > 0.9, result.figures["cases"]
    (True, 144)
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from wmrl_env.fidelity.cases import Cases
from wmrl_env.fidelity.metrics import (
    grpo_groups,
    noise_ceiling,
    score_figures,
    status_figures,
    within_group_spearman,
)
from wmrl_env.fidelity.quality import HEADLINE_CURVE, HEADLINE_SOURCE, predicted_saving
from wmrl_env.world_models.outcomes import OutcomePrediction

__all__ = ["Fidelity", "measure", "teach_anchors"]


@dataclass(frozen=True)
class Fidelity:
    """The figures (plain data, what the JSON holds) and what they were computed from."""

    figures: dict[str, Any]
    outcome: OutcomePrediction
    cases: Cases


def teach_anchors(
    world_model: Any,
    cases: Cases,
    anchor_groups: int,
    group_size: int,
    failure_score: float,
    rng: np.random.Generator,
) -> np.ndarray:
    """Give the world model ``anchor_groups`` groups of each task's executions (their real
    rewards, a failure at ``failure_score``, as a round does) and return the rows left for
    measuring."""
    if anchor_groups == 0:
        return np.arange(len(cases))
    if not callable(getattr(world_model, "update", None)):
        raise ValueError("anchor_groups > 0 needs a world model that learns (update)")
    tasks = np.asarray(cases.task_ids, dtype=object)
    taught, rest = [], []
    for task in dict.fromkeys(cases.task_ids):
        rows = rng.permutation(np.flatnonzero(tasks == task))
        taught += list(rows[: anchor_groups * group_size])
        rest += list(rows[anchor_groups * group_size :])
    taught = np.array(sorted(taught), dtype=int)
    reward = cases.reward(failure_score)
    world_model.update(
        [cases.contexts[i] for i in taught], [cases.programs[i] for i in taught], reward[taught]
    )
    return np.array(sorted(rest), dtype=int)


def measure(
    world_model: Any,
    cases: Cases,
    *,
    group_size: int = 8,
    anchor_groups: int = 0,
    failure_score: float = 0.0,
    seed: int = 0,
    curve: Any = HEADLINE_CURVE,
    curve_source: str = HEADLINE_SOURCE,
) -> Fidelity:
    """The fidelity figures of ``world_model`` on ``cases`` (see the module doc)."""
    if not callable(getattr(world_model, "predict_outcomes", None)):
        raise TypeError(
            f"{type(world_model).__name__} has no predict_outcomes: the fidelity report reads "
            "the prediction contract (wmrl_env.world_models.outcomes)"
        )
    if anchor_groups < 0:
        raise ValueError(f"anchor_groups must be >= 0, got {anchor_groups}")
    rng = np.random.default_rng(seed)
    rows = teach_anchors(world_model, cases, anchor_groups, group_size, failure_score, rng)
    measured = cases.subset(rows)
    if len(measured) == 0:
        raise ValueError("no executions left to measure after the anchors")
    start = time.process_time()
    outcome = world_model.predict_outcomes(
        measured.contexts, measured.programs, failure_score=failure_score
    )
    cpu_seconds = time.process_time() - start
    groups = grpo_groups(measured.task_ids, group_size, rng)
    real = measured.reward(failure_score)
    spearman = within_group_spearman(outcome.expected_reward, real, groups)
    ok_only = [g[measured.status[g] == "ok"] for g in groups]
    score_spearman = within_group_spearman(
        outcome.score, measured.score, [g for g in ok_only if len(g) >= 2]
    )
    figures = {
        "world_model": type(world_model).__name__,
        "source": measured.source,
        "skipped": measured.skipped,
        "cases": len(measured),
        "tasks": len(set(measured.task_ids)),
        "group_size": group_size,
        "anchor_groups": anchor_groups,
        "failure_score": failure_score,
        "seed": seed,
        "status": status_figures(outcome, measured),
        "score": score_figures(outcome, measured),
        "within_group_spearman": spearman,
        "within_group_spearman_ok_runs": score_spearman,
        "noise_ceiling": noise_ceiling(measured, failure_score, group_size, rng),
        "predicted_saving": predicted_saving(spearman["mean"], curve, curve_source),
        "predict_cpu_seconds": cpu_seconds,
    }
    return Fidelity(figures, outcome, measured)
