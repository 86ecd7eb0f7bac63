"""wmrl-env: World Model RL environments.

Answer most ``env.step()`` calls from a batched world model, execute a small random share of
GRPO groups for real as anchors, recalibrate the world model against the anchors every step
and fuse the two reward streams with inverse-variance weights.

The top level holds what a training script constructs, implements or catches (docs/api.md):
the environments, the reward fusion and its warning, the world-model protocols with what they
return, and the executor contract with each executor family's job type and default backend.
Everything else lives in its subpackage (``wmrl_env.fusion``, ``wmrl_env.sandboxes``, ...).

Example:
    >>> import wmrl_env
    >>> fusion = wmrl_env.RewardFusion(method="wmrl", anchor_fraction=0.25, seed=0)
    >>> wmrl_env.ExecStatus("timeout") is wmrl_env.ExecStatus.TIMEOUT
    True
"""

from wmrl_env.env_executors import EnvJob, GymEnvExecutor
from wmrl_env.executors import ExecResult, ExecStatus, Executor
from wmrl_env.fusion import FusionOutput, RewardFusion, RewardHackingWarning
from wmrl_env.sandboxes import Job, LocalSandbox
from wmrl_env.world_models import (
    DynamicsWorldModel,
    Prediction,
    StepPrediction,
    UpdatableWorldModel,
    WorldModel,
)
from wmrl_env.wrappers import WorldModelVectorEnv, WorldModelWrapper

__version__ = "0.2.0"

__all__ = [
    "DynamicsWorldModel",
    "EnvJob",
    "ExecResult",
    "ExecStatus",
    "Executor",
    "FusionOutput",
    "GymEnvExecutor",
    "Job",
    "LocalSandbox",
    "Prediction",
    "RewardFusion",
    "RewardHackingWarning",
    "StepPrediction",
    "UpdatableWorldModel",
    "WorldModel",
    "WorldModelVectorEnv",
    "WorldModelWrapper",
    "__version__",
]
