"""World models: batched predictors of real execution outcomes.

Backends with heavy dependencies (torch, transformers, vLLM) import them only when constructed.
The learned dynamics ensemble for robot state lives in :mod:`wmrl_env.world_models.dynamics`.
"""

from wmrl_env.world_models.base import (
    DynamicsWorldModel,
    Prediction,
    StepPrediction,
    UpdatableWorldModel,
    WorldModel,
    as_prediction,
    as_step_prediction,
)

__all__ = [
    "DynamicsWorldModel",
    "Prediction",
    "StepPrediction",
    "UpdatableWorldModel",
    "WorldModel",
    "as_prediction",
    "as_step_prediction",
]
