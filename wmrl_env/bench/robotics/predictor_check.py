"""Does the world model's score predict real success on the *current* policy's episodes?

Every real episode of a round also has a world-model score: the model *shadows* it from the
same start (:mod:`~wmrl_env.wrappers.shadows`; the bench's ``shadow``), so the pair (world-model
score, real success) is an on-policy test of the success predictor, free of extra real steps.
:func:`round_pairs` takes those pairs, with each episode's group, from a round's last ``info``;
:func:`predictor_check` turns them into the figures the bench reports every round: ROC AUC
over all the episodes (*pooled*: the groups' different starts in it), the *within-group* AUC
(:func:`within_group_auc`: only pairs of episodes from the same start, the comparison GRPO's
advantages make), Brier score and mean prediction vs success rate (calibration of the score,
clipped to ``[0, 1]``, read as a probability).

Example:
    >>> import numpy as np
    >>> scores = np.array([0.9, 0.9, 0.9, 0.1, 0.1, 0.1])  # it knows the starts, nothing more
    >>> successes = np.array([1, 1, 0, 1, 0, 0], bool)  # an easy start, a hard one
    >>> check = predictor_check(scores, successes, groups=np.array([0, 0, 0, 1, 1, 1]))
    >>> round(check.auc, 3), check.within_group_auc, round(check.brier, 3), check.success_rate
    (0.667, 0.5, 0.277, 0.5)
    >>> np.isnan(predictor_check(np.array([0.4]), np.array([True])).auc)  # one class
    np.True_
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

__all__ = [
    "PredictorCheck",
    "paired_episodes",
    "predictor_check",
    "round_pairs",
    "within_group_auc",
]


@dataclass(frozen=True)
class PredictorCheck:
    """World-model score against real success over ``episodes`` real episodes (``auc`` is NaN
    when they are all successes or all failures, ``within_group_auc`` when no group has both,
    or no groups were given)."""

    episodes: int
    successes: int
    auc: float
    brier: float
    mean_prediction: float
    success_rate: float
    within_group_auc: float = float("nan")

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def round_pairs(info: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(world-model scores, real successes, group ids)`` of the round's real episodes that
    have both scores (a real episode succeeded when its real score, the sum of its sparse
    rewards, is > 0)."""
    usable = paired_episodes(info)
    real = np.asarray(info["real_score"], np.float64)
    wm = np.asarray(info["wm_score"], np.float64)
    groups = np.asarray(info["group_id"], np.int64)
    return wm[usable], real[usable] > 0, groups[usable]


def paired_episodes(info: dict[str, Any]) -> np.ndarray:
    """Per env of a round's last ``info``: a real episode with both scores (what
    :func:`round_pairs` keeps)."""
    real = np.asarray(info["real_score"], np.float64)
    wm = np.asarray(info["wm_score"], np.float64)
    valid = np.asarray(info.get("wm_valid", np.ones(len(wm), bool)), bool)
    return np.isfinite(real) & np.isfinite(wm) & valid


def predictor_check(
    scores: np.ndarray, successes: np.ndarray, groups: np.ndarray | None = None
) -> PredictorCheck:
    """ROC AUC, within-group AUC (with ``groups``, one id per episode), Brier score and
    calibration of ``scores`` against binary ``successes``."""
    scores = np.asarray(scores, np.float64).reshape(-1)
    successes = np.asarray(successes, bool).reshape(-1)
    if scores.shape != successes.shape:
        raise ValueError(f"scores {scores.shape} and successes {successes.shape} differ")
    if scores.size == 0:
        raise ValueError("no episode to check the predictor on")
    if not np.isfinite(scores).all():
        raise ValueError("scores must be finite")
    probability = np.clip(scores, 0.0, 1.0)
    return PredictorCheck(
        episodes=int(scores.size),
        successes=int(successes.sum()),
        auc=_auc(scores, successes),
        brier=float(np.mean((probability - successes) ** 2)),
        mean_prediction=float(probability.mean()),
        success_rate=float(successes.mean()),
        within_group_auc=np.nan if groups is None else within_group_auc(scores, successes, groups),
    )


def within_group_auc(scores: np.ndarray, successes: np.ndarray, groups: np.ndarray) -> float:
    """The probability that, of a success and a failure *from the same group*, the success
    scores higher (ties one half), over every such pair; NaN when no group has both outcomes.
    What a start's difficulty adds to the pooled AUC is left out.

    >>> import numpy as np
    >>> scores = np.array([0.9, 0.8, 0.3, 0.2])
    >>> successes = np.array([True, False, True, False])
    >>> within_group_auc(scores, successes, np.array([0, 0, 1, 1]))  # pooled: 0.75
    1.0
    >>> within_group_auc(scores, successes, np.array([0, 1, 2, 3]))  # no group has both
    nan
    """
    scores = np.asarray(scores, np.float64).reshape(-1)
    successes = np.asarray(successes, bool).reshape(-1)
    groups = np.asarray(groups).reshape(-1)
    if not scores.shape == successes.shape == groups.shape:
        raise ValueError(
            f"scores {scores.shape}, successes {successes.shape} and groups {groups.shape} differ"
        )
    wins = pairs = 0.0
    for group in np.unique(groups):
        own = groups == group
        positives, negatives = scores[own & successes], scores[own & ~successes]
        wins += _wins(positives, negatives)
        pairs += positives.size * negatives.size
    return float(wins / pairs) if pairs else float("nan")


def _auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Mann-Whitney AUC with ties counted one half (NaN with one class)."""
    positives, negatives = scores[labels], scores[~labels]
    if positives.size == 0 or negatives.size == 0:
        return float("nan")
    return float(_wins(positives, negatives) / (positives.size * negatives.size))


def _wins(positives: np.ndarray, negatives: np.ndarray) -> float:
    """(positive, negative) pairs ordered right, ties counted one half."""
    above = (positives[:, None] > negatives[None, :]).sum()
    ties = (positives[:, None] == negatives[None, :]).sum()
    return float(above + 0.5 * ties)
