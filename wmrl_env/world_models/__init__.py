"""World models: batched predictors of real execution outcomes.

Backends with heavy dependencies (torch, transformers, vLLM) import them only when constructed.
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
