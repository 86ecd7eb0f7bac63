"""The fidelity figures: how well a world model's contract predicts real executions.

Each function takes an :class:`~wmrl_env.world_models.outcomes.OutcomePrediction` and the
:class:`~wmrl_env.fidelity.cases.Cases` it was made for, and returns plain numbers (``None``
where a figure cannot be computed, e.g. an AUC without failures).

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> groups = grpo_groups(["a"] * 5 + ["b"] * 8, group_size=4, rng=rng)
    >>> [len(g) for g in groups]
    [4, 4, 4]
    >>> figures = within_group_spearman(np.arange(4.0), np.array([0.0, 1, 3, 2]), [np.arange(4)])
    >>> round(figures["mean"], 6), figures["groups"], figures["tied_groups"]
    (0.8, 1, 0)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.stats import norm, spearmanr

from wmrl_env.fidelity.cases import Cases
from wmrl_env.world_models.outcomes import STATUSES, UNKNOWN_ERROR, OutcomePrediction
from wmrl_env.world_models.text import text_key

__all__ = [
    "grpo_groups",
    "noise_ceiling",
    "score_figures",
    "status_figures",
    "within_group_spearman",
]


def grpo_groups(task_ids: Sequence[str], group_size: int, rng: np.random.Generator) -> list:
    """Groups of ``group_size`` rows of one task each, drawn as GRPO forms them: each task's
    rows in a random order, cut into full groups (a remainder is left out)."""
    if group_size < 2:
        raise ValueError(f"group_size must be at least 2, got {group_size}")
    tasks = np.asarray(task_ids, dtype=object)
    groups = []
    for task in dict.fromkeys(task_ids):
        rows = rng.permutation(np.flatnonzero(tasks == task))
        groups += [rows[i : i + group_size] for i in range(0, len(rows) - group_size + 1,
                                                            group_size)]  # fmt: skip
    return groups


def within_group_spearman(
    predicted: np.ndarray, real: np.ndarray, groups: Sequence[np.ndarray]
) -> dict[str, Any]:
    """Mean Spearman correlation of predicted and real rewards within each group; a group
    whose real or predicted rewards are all tied has no order and is left out (counted)."""
    values, tied = [], 0
    for rows in groups:
        p, r = predicted[rows], real[rows]
        if np.ptp(r) == 0 or np.ptp(p) == 0 or not np.isfinite(p).all():
            tied += 1
            continue
        values.append(float(spearmanr(p, r).statistic))
    mean = float(np.mean(values)) if values else None
    return {"mean": mean, "groups": len(values), "tied_groups": tied}


def status_figures(outcome: OutcomePrediction, cases: Cases) -> dict[str, Any]:
    """Status accuracy (most probable status = real status), failure AUC and the failure
    probability's expected calibration error (10 equal-width bins), the error-class match
    on crashes whose class is known, and how the pre-gate's known answers fared."""
    from sklearn.metrics import roc_auc_score

    predicted = outcome.status()
    failed = cases.status != "ok"
    p_fail = outcome.p_fail
    auc = roc_auc_score(failed, p_fail) if 0 < failed.sum() < len(failed) else None
    crashes = (cases.status == "crashed") & (cases.error != UNKNOWN_ERROR)
    matched = outcome.error_class()[crashes] == cases.error[crashes]
    known = outcome.known
    return {
        "n": len(cases),
        "accuracy": float(np.mean(predicted == cases.status)),
        "majority_accuracy": float(max(np.mean(cases.status == s) for s in STATUSES)),
        "failure_share": float(failed.mean()),
        "failure_auc": None if auc is None else float(auc),
        "failure_calibration_error": _ece(p_fail, failed),
        "error_class_match": float(matched.mean()) if crashes.any() else None,
        "crashes_with_a_known_class": int(crashes.sum()),
        "known": int(known.sum()),
        "known_correct": int(np.sum(predicted[known] == cases.status[known])),
        "confusion": {
            real: {p: int(np.sum((cases.status == real) & (predicted == p))) for p in STATUSES}
            for real in STATUSES
            if (cases.status == real).any()
        },
    }


def _ece(probability: np.ndarray, outcome: np.ndarray, bins: int = 10) -> float:
    edges = np.minimum((probability * bins).astype(int), bins - 1)
    total = 0.0
    for b in range(bins):
        members = edges == b
        if members.any():
            total += members.mean() * abs(probability[members].mean() - outcome[members].mean())
    return float(total)


def score_figures(outcome: OutcomePrediction, cases: Cases) -> dict[str, Any]:
    """On ``ok`` runs: the mean absolute error of the score given ok, the shares of real
    scores inside +-1 and +-2 predicted std, and the std's calibration error (mean gap
    between the share inside +-k std and its nominal ``2 Phi(k) - 1`` over k in (0, 3])."""
    rows = (cases.status == "ok") & np.isfinite(outcome.score) & np.isfinite(cases.score)
    if not rows.any():
        return {"n": 0, "mae": None, "coverage_1sd": None, "coverage_2sd": None,
                "std_calibration_error": None}  # fmt: skip
    error = np.abs(outcome.score[rows] - cases.score[rows])
    std = outcome.std[rows]
    with_std = np.isfinite(std) & (std > 0)
    figures: dict[str, Any] = {"n": int(rows.sum()), "mae": float(error.mean())}
    if not with_std.any():
        return {**figures, "coverage_1sd": None, "coverage_2sd": None,
                "std_calibration_error": None}  # fmt: skip
    z = error[with_std] / std[with_std]
    ks = np.linspace(0.1, 3.0, 30)
    gaps = [abs(np.mean(z <= k) - (2 * norm.cdf(k) - 1)) for k in ks]
    return {
        **figures,
        "coverage_1sd": float(np.mean(z <= 1.0)),
        "coverage_2sd": float(np.mean(z <= 2.0)),
        "std_calibration_error": float(np.mean(gaps)),
    }


def noise_ceiling(
    cases: Cases, failure_score: float, group_size: int, rng: np.random.Generator
) -> dict[str, Any]:
    """What repeated executions of the same program on the same task allow: the within-group
    Spearman between one run's rewards and another run's (the best any world model can reach
    against a single run) and the runs' reward noise (pooled within-program std). ``None``
    figures, with the reason, where no program ran twice."""
    reward = cases.reward(failure_score)
    by_program: dict[tuple[str, str], list[int]] = {}
    for i, (task, program) in enumerate(zip(cases.task_ids, cases.programs, strict=True)):
        by_program.setdefault((task, text_key(program)), []).append(i)
    repeated = [rows for rows in by_program.values() if len(rows) >= 2]
    if not repeated:
        return {"spearman": None, "reward_noise_std": None, "repeated_programs": 0,
                "reason": "no program ran twice on the same task"}  # fmt: skip
    deviations = np.concatenate([reward[r] - reward[r].mean() for r in repeated])
    dof = sum(len(r) - 1 for r in repeated)
    first = np.array([rows[0] for rows in repeated])
    second = np.array([rows[1] for rows in repeated])
    groups = grpo_groups([cases.task_ids[i] for i in first], group_size, rng)
    ceiling = within_group_spearman(reward[first], reward[second], groups)
    return {
        "spearman": ceiling["mean"],
        "groups": ceiling["groups"],
        "reward_noise_std": float(math.sqrt(float(deviations @ deviations) / dof)),
        "repeated_programs": len(repeated),
        "reason": "" if ceiling["mean"] is not None else "too few repeated programs per task",
    }
