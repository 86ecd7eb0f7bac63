"""World models: batched predictors of real execution outcomes.

Every outcome world model returns the prediction contract, ``predict_outcomes`` ->
:class:`OutcomePrediction` (status probabilities, score given ok with its std, expected
reward under the failure score, the pre-gate's certain answers), beside ``predict``.

The default for ML code is :func:`load_default_ml_world_model` (world model v3: program
syntax x task features, pretrained, learns each task online from its anchors through how
programs co-vary across tasks, calibrated std); :func:`load_ml_world_model` loads v2 or v3
by name.

Backends with heavy dependencies (torch, transformers, vLLM) import them only when constructed.
The learned dynamics ensemble for robot state lives in
:mod:`wmrl_env.world_models.dynamics.ensemble`. The modules are grouped by family:
:mod:`~wmrl_env.world_models.programs`, :mod:`~wmrl_env.world_models.lm`,
:mod:`~wmrl_env.world_models.embeddings` and :mod:`~wmrl_env.world_models.dynamics`; what
they share (the prediction types, the outcome contract, text keys, conformal std, saved
state files, training pairs) is at the top.
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
from wmrl_env.world_models.embeddings.embedding_regressor import EmbeddingRegressor
from wmrl_env.world_models.embeddings.encoder import TextEncoder
from wmrl_env.world_models.lm.causal_lm import CausalLMScorer
from wmrl_env.world_models.lm.online_lora import OnlineLoraConfig
from wmrl_env.world_models.lm.prompting import ScorePrompt, StatusPrompt
from wmrl_env.world_models.lm.score_bins import ScoreBins
from wmrl_env.world_models.lm.vllm_backend import VLLMScorer
from wmrl_env.world_models.outcomes import OutcomePrediction
from wmrl_env.world_models.programs.ml_default import (
    load_default_ml_world_model,
    load_ml_world_model,
)
from wmrl_env.world_models.programs.program_profile import ProgramProfileWorldModel
from wmrl_env.world_models.programs.program_task import ProgramTaskWorldModel
from wmrl_env.world_models.programs.status_model import StatusModel
from wmrl_env.world_models.training_data import read_training_pairs

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
