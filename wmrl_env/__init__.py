"""wmrl-env: World Model RL environments.

Answer most ``env.step()`` calls from a batched world model, execute a small random share of
GRPO groups for real as anchors, recalibrate the world model against the anchors every step
and fuse the two reward streams with inverse-variance weights.
"""

from wmrl_env.executors.base import ExecResult, ExecStatus, Executor
from wmrl_env.fusion import FusionOutput, OnlineCalibrator, RewardFusion
from wmrl_env.sandboxes.job import Job
from wmrl_env.world_models.base import DynamicsWorldModel, Prediction, WorldModel
from wmrl_env.wrappers import WorldModelVectorEnv, WorldModelWrapper

__version__ = "0.1.0"

__all__ = [
    "DynamicsWorldModel",
    "ExecResult",
    "ExecStatus",
    "Executor",
    "FusionOutput",
    "Job",
    "OnlineCalibrator",
    "Prediction",
    "RewardFusion",
    "WorldModel",
    "WorldModelVectorEnv",
    "WorldModelWrapper",
    "__version__",
]
