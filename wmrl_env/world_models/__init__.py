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
from wmrl_env.world_models.causal_lm import CausalLMScorer
from wmrl_env.world_models.embedding_regressor import EmbeddingRegressor
from wmrl_env.world_models.encoder import TextEncoder
from wmrl_env.world_models.prompting import ScorePrompt
from wmrl_env.world_models.score_bins import ScoreBins
from wmrl_env.world_models.training_data import read_training_pairs
from wmrl_env.world_models.vllm_backend import VLLMScorer

__all__ = [
    "CausalLMScorer",
    "DynamicsWorldModel",
    "EmbeddingRegressor",
    "Prediction",
    "ScoreBins",
    "ScorePrompt",
    "StepPrediction",
    "TextEncoder",
    "UpdatableWorldModel",
    "VLLMScorer",
    "WorldModel",
    "as_prediction",
    "as_step_prediction",
    "read_training_pairs",
]
