"""Calling a world model from a wrapper: which kind it is, one timed batched call, validation.

Example:
    >>> import numpy as np
    >>> class Constant:
    ...     def predict(self, contexts, artifacts):
    ...         return np.full(len(artifacts), 0.5)
    >>> task_kind(Constant())
    'outcome'
    >>> prediction, seconds = predict_outcome(Constant(), ["task"] * 2, ["a", "b"])
    >>> prediction.scores.tolist(), prediction.valid.tolist()
    ([0.5, 0.5], [True, True])
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from wmrl_env.world_models.base import (
    AnyWorldModel,
    DynamicsWorldModel,
    Prediction,
    StepPrediction,
    WorldModel,
    as_prediction,
    as_step_prediction,
)

__all__ = ["TaskKind", "predict_outcome", "predict_step", "task_kind"]

TaskKind = Literal["outcome", "dynamics"]


def task_kind(world_model: AnyWorldModel, task: str = "auto") -> TaskKind:
    """``"outcome"`` for ``predict(contexts, artifacts)``, ``"dynamics"`` for ``predict_step``.

    ``task="auto"`` prefers outcome when a model offers both.
    """
    if task not in ("auto", "outcome", "dynamics"):
        raise ValueError(f"task must be 'auto', 'outcome' or 'dynamics', got {task!r}")
    has = {
        "outcome": callable(getattr(world_model, "predict", None)),
        "dynamics": callable(getattr(world_model, "predict_step", None)),
    }
    if task != "auto":
        if not has[task]:
            method = "predict" if task == "outcome" else "predict_step"
            raise TypeError(
                f"task={task!r} needs a world model with {method}(), got {world_model!r}"
            )
        return task  # type: ignore[return-value]
    if has["outcome"]:
        return "outcome"
    if has["dynamics"]:
        return "dynamics"
    raise TypeError(
        "world_model must have predict(contexts, artifacts) (outcome tasks) or "
        f"predict_step(observations, actions) (multi-step tasks), got {world_model!r}"
    )


def predict_outcome(
    world_model: WorldModel,
    contexts: Sequence[Any],
    artifacts: Sequence[Any],
    score_range: tuple[float, float] | None = None,
) -> tuple[Prediction, float]:
    """One batched ``predict`` call; invalid items are flagged, not raised. Returns seconds too."""
    start = time.perf_counter()
    output = world_model.predict(contexts, artifacts)
    seconds = time.perf_counter() - start
    return as_prediction(output, n=len(artifacts), score_range=score_range), seconds


def predict_step(
    world_model: DynamicsWorldModel, observations: np.ndarray, actions: np.ndarray
) -> tuple[StepPrediction, float]:
    """One batched ``predict_step`` call, normalised; returns the seconds it took too."""
    start = time.perf_counter()
    output = world_model.predict_step(observations, actions)
    seconds = time.perf_counter() - start
    step = as_step_prediction(output, n=len(observations), obs_shape=observations.shape[1:])
    return step, seconds
