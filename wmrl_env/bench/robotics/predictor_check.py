"""Does the world model's score predict real success on the *current* policy's episodes?

Every real episode of a round also has a world-model score: the model shadows it from the same
start with the same chunks (:class:`~wmrl_env.wrappers.dynamics.DynamicsRound`), so the pair
(world-model score, real success) is an on-policy test of the success predictor, free of extra
real steps. :func:`round_pairs` takes those pairs from a round's last ``info``;
:func:`predictor_check` turns pairs into the figures the bench reports every round: ROC AUC
(does the score rank successes above failures), Brier score and mean prediction vs success
rate (calibration of the score, clipped to ``[0, 1]``, read as a probability).

Example:
    >>> import numpy as np
    >>> check = predictor_check(np.array([0.9, 0.8, 0.2, 0.1]), np.array([1, 0, 0, 0], bool))
    >>> check.auc, round(check.brier, 3), check.mean_prediction, check.success_rate
    (1.0, 0.175, 0.5, 0.25)
    >>> np.isnan(predictor_check(np.array([0.4]), np.array([True])).auc)  # one class
    np.True_
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

__all__ = ["PredictorCheck", "predictor_check", "round_pairs"]


@dataclass(frozen=True)
class PredictorCheck:
    """World-model score against real success over ``episodes`` real episodes (``auc`` is NaN
    when they are all successes or all failures)."""

    episodes: int
    successes: int
    auc: float
    brier: float
    mean_prediction: float
    success_rate: float

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def round_pairs(info: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """``(world-model scores, real successes)`` of the round's real episodes that have both
    (a real episode succeeded when its real score, the sum of its sparse rewards, is > 0)."""
    real = np.asarray(info["real_score"], np.float64)
    wm = np.asarray(info["wm_score"], np.float64)
    valid = np.asarray(info.get("wm_valid", np.ones(len(wm), bool)), bool)
    usable = np.isfinite(real) & np.isfinite(wm) & valid
    return wm[usable], real[usable] > 0


def predictor_check(scores: np.ndarray, successes: np.ndarray) -> PredictorCheck:
    """ROC AUC, Brier score and calibration of ``scores`` against binary ``successes``."""
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
    )


def _auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Mann-Whitney AUC with ties counted one half (NaN with one class)."""
    positives, negatives = scores[labels], scores[~labels]
    if positives.size == 0 or negatives.size == 0:
        return float("nan")
    above = (positives[:, None] > negatives[None, :]).sum()
    ties = (positives[:, None] == negatives[None, :]).sum()
    return float((above + 0.5 * ties) / (positives.size * negatives.size))
