"""The WorldModel contracts: batched predictors of what a real execution would return.

Two kinds of task, two protocols:

* **Outcome** tasks (one artifact per episode: a program, a plan, an action sequence):
  ``predict(contexts, artifacts)`` returns one predicted score per item.
* **Dynamics** tasks (multi-step): ``predict_step(observations, actions)`` returns next
  observations, rewards and terminations for a batch of transitions.

A world model may return a bare ``np.ndarray`` of scores, a ``(scores, std)`` tuple or a
:class:`Prediction`; :func:`as_prediction` normalises all three and flags garbage per item
(NaN, inf, out of range) instead of letting it reach the reward fusion.

Example:
    >>> import numpy as np
    >>> p = as_prediction(np.array([0.2, np.nan, 1.7]), n=3, score_range=(0.0, 1.0))
    >>> p.valid.tolist(), p.reasons
    ([True, False, False], ['', 'nan', 'out_of_range'])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = [
    "AnyWorldModel",
    "DynamicsWorldModel",
    "Prediction",
    "StepPrediction",
    "UpdatableWorldModel",
    "WorldModel",
    "as_prediction",
    "as_step_prediction",
    "learn_from_real_scores",
]


@dataclass(frozen=True)
class Prediction:
    """Predicted scores for a batch, with optional per-item uncertainty and validity.

    Attributes:
        scores: shape ``(N,)`` float64. Invalid items keep whatever the model produced.
        std: shape ``(N,)`` non-negative predictive standard deviation, or ``None``.
        valid: shape ``(N,)`` bool; False where the prediction must not be trusted.
        reasons: per item, ``""`` when valid, else why not (``"nan"``, ``"inf"``,
            ``"out_of_range"``, ``"unparseable"``, ...).
    """

    scores: np.ndarray
    std: np.ndarray | None = None
    valid: np.ndarray | None = None
    reasons: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return int(self.scores.shape[0])


@runtime_checkable
class WorldModel(Protocol):
    """An outcome world model: one batched call scores every (context, artifact) pair."""

    def predict(
        self, contexts: Sequence[Any], artifacts: Sequence[Any]
    ) -> Prediction | np.ndarray | tuple[np.ndarray, np.ndarray]: ...


@runtime_checkable
class UpdatableWorldModel(WorldModel, Protocol):
    """A world model that learns online from real executions (the anchors)."""

    def update(
        self, contexts: Sequence[Any], artifacts: Sequence[Any], real_scores: np.ndarray
    ) -> None: ...


def learn_from_real_scores(
    world_model: Any, contexts: Sequence[Any], artifacts: Sequence[Any], real_scores: np.ndarray
) -> int:
    """Feed every item with a real score (finite: executed, not failed) to the world model's
    ``update``, when it is an :class:`UpdatableWorldModel`; returns how many it was given.

    What every caller does after a round: the anchors teach the world model.

    Example:
        >>> class Mean:
        ...     seen = []
        ...     def predict(self, contexts, artifacts): return np.zeros(len(artifacts))
        ...     def update(self, contexts, artifacts, real): self.seen += list(real)
        >>> model = Mean()
        >>> learn_from_real_scores(model, ["a", "b", "c"], [1, 2, 3], np.array([0.5, np.nan, 1.0]))
        2
        >>> model.seen
        [np.float64(0.5), np.float64(1.0)]
    """
    real = np.asarray(real_scores, dtype=np.float64)
    known = np.flatnonzero(np.isfinite(real))
    if not (known.size and isinstance(world_model, UpdatableWorldModel)):
        return 0
    world_model.update([contexts[i] for i in known], [artifacts[i] for i in known], real[known])
    return int(known.size)


@dataclass(frozen=True)
class StepPrediction:
    """One imagined transition per item of a batch.

    Attributes:
        next_observations: shape ``(N, *obs_shape)``.
        rewards: shape ``(N,)`` float64.
        terminations: shape ``(N,)`` bool.
        std: shape ``(N,)`` uncertainty (e.g. ensemble disagreement) or ``None``.
        valid: shape ``(N,)`` bool; False where the model produced NaN/inf.
    """

    next_observations: np.ndarray
    rewards: np.ndarray
    terminations: np.ndarray
    std: np.ndarray | None = None
    valid: np.ndarray | None = None


@runtime_checkable
class DynamicsWorldModel(Protocol):
    """A dynamics world model: batched one-step imagination."""

    def predict_step(
        self, observations: np.ndarray, actions: np.ndarray
    ) -> StepPrediction | tuple[np.ndarray, ...]: ...


AnyWorldModel = WorldModel | DynamicsWorldModel
"""What a wrapper accepts: an outcome or a dynamics world model (it tells them apart)."""


def _check_length(name: str, array: np.ndarray, n: int) -> None:
    if array.ndim != 1 or array.shape[0] != n:
        raise ValueError(f"world model returned {name} of shape {array.shape}, expected ({n},)")


def as_prediction(
    output: Prediction | np.ndarray | Sequence[float] | tuple[Any, Any],
    n: int,
    score_range: tuple[float, float] | None = None,
) -> Prediction:
    """Normalise a world model's output for ``n`` items and flag invalid items.

    Raises ``ValueError`` when the output has the wrong shape (a programming error); marks
    NaN, inf and (when ``score_range`` is given) out-of-range scores as invalid per item.
    """
    if isinstance(output, Prediction):
        scores, std, valid, reasons = output.scores, output.std, output.valid, output.reasons
    elif isinstance(output, tuple) and len(output) == 2:
        (scores, std), valid, reasons = output, None, []
    else:
        scores, std, valid, reasons = output, None, None, []
    try:
        scores = np.asarray(scores, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"world model returned scores that are not numbers: {exc}") from exc
    _check_length("scores", scores, n)
    if std is not None:
        std = np.asarray(std, dtype=np.float64)
        _check_length("std", std, n)
    valid = np.ones(n, dtype=bool) if valid is None else np.asarray(valid, dtype=bool).copy()
    _check_length("valid", valid, n)
    reasons = list(reasons) if len(reasons) == n else ["" if v else "invalid" for v in valid]

    def flag(mask: np.ndarray, reason: str) -> None:
        for i in np.flatnonzero(mask & valid):
            reasons[i] = reason
        valid[mask] = False

    flag(np.isnan(scores), "nan")
    flag(np.isinf(scores), "inf")
    if score_range is not None:
        low, high = score_range
        with np.errstate(invalid="ignore"):
            flag((scores < low) | (scores > high), "out_of_range")
    if std is not None:
        flag(~np.isfinite(std) | (std < 0), "bad_std")
    return Prediction(scores=scores, std=std, valid=valid, reasons=reasons)


def as_step_prediction(
    output: StepPrediction | tuple[Any, ...], n: int, obs_shape: tuple[int, ...]
) -> StepPrediction:
    """Normalise a dynamics model's output for ``n`` transitions and flag NaN/inf items.

    Accepts a :class:`StepPrediction` or a tuple ``(next_obs, rewards, terminations[, std])``.
    """
    if isinstance(output, StepPrediction):
        next_obs, rewards, terms, std = (
            output.next_observations,
            output.rewards,
            output.terminations,
            output.std,
        )
    elif isinstance(output, tuple) and len(output) in (3, 4):
        next_obs, rewards, terms = output[:3]
        std = output[3] if len(output) == 4 else None
    else:
        raise ValueError(
            "predict_step must return StepPrediction or (next_obs, rewards, terminations[, std])"
        )
    next_obs = np.asarray(next_obs)
    if next_obs.shape != (n, *obs_shape):
        raise ValueError(
            f"world model returned next observations of shape {next_obs.shape}, "
            f"expected {(n, *obs_shape)}"
        )
    rewards = np.asarray(rewards, dtype=np.float64)
    _check_length("rewards", rewards, n)
    terms = np.asarray(terms, dtype=bool)
    _check_length("terminations", terms, n)
    if std is not None:
        std = np.asarray(std, dtype=np.float64)
        _check_length("std", std, n)
    finite_obs = _usable_observations(next_obs, n)
    valid = np.isfinite(rewards) & finite_obs
    return StepPrediction(next_obs, rewards, terms, std=std, valid=valid)


def _usable_observations(next_obs: np.ndarray, n: int) -> np.ndarray | bool:
    """Per item: numeric observations all finite; text or object observations not ``None``."""
    if not next_obs.size:
        return True
    rows = next_obs.reshape(n, -1)
    if next_obs.dtype.kind in "biufc":
        return np.isfinite(rows).all(axis=1)
    return np.array([all(value is not None for value in row) for row in rows], dtype=bool)
