"""World models: batched predictors of real execution outcomes.

Every outcome world model returns the prediction contract, ``predict_outcomes`` ->
:class:`OutcomePrediction` (status probabilities, score given ok with its std, expected
reward under the failure score, the pre-gate's certain answers), beside ``predict``.

The default for ML code is :func:`load_default_ml_world_model` (world model v3: program
syntax x task features, pretrained, learns each task online from its anchors through how
programs co-vary across tasks, calibrated std); :func:`load_ml_world_model` loads v2 or v3
by name.

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
from wmrl_env.world_models.causal_lm import CausalLMScorer
from wmrl_env.world_models.embedding_regressor import EmbeddingRegressor
from wmrl_env.world_models.encoder import TextEncoder
from wmrl_env.world_models.ml_default import load_default_ml_world_model, load_ml_world_model
from wmrl_env.world_models.online_lora import OnlineLoraConfig
from wmrl_env.world_models.outcomes import OutcomePrediction
from wmrl_env.world_models.program_profile import ProgramProfileWorldModel
from wmrl_env.world_models.program_task import ProgramTaskWorldModel
from wmrl_env.world_models.prompting import ScorePrompt, StatusPrompt
from wmrl_env.world_models.score_bins import ScoreBins
from wmrl_env.world_models.status_model import StatusModel
from wmrl_env.world_models.training_data import read_training_pairs
from wmrl_env.world_models.vllm_backend import VLLMScorer

__all__ = [
    "CausalLMScorer",
    "DynamicsWorldModel",
    "EmbeddingRegressor",
    "OnlineLoraConfig",
    "OutcomePrediction",
    "Prediction",
    "ProgramProfileWorldModel",
    "ProgramTaskWorldModel",
    "ScoreBins",
    "ScorePrompt",
    "StatusModel",
    "StatusPrompt",
    "StepPrediction",
    "TextEncoder",
    "UpdatableWorldModel",
    "VLLMScorer",
    "WorldModel",
    "as_prediction",
    "as_step_prediction",
    "load_default_ml_world_model",
    "load_ml_world_model",
    "read_training_pairs",
]
