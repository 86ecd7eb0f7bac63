"""Gymnasium wrappers that answer ``step()`` from a world model and anchor a few groups for real.

* :class:`WorldModelVectorEnv`: a vector env of GRPO groups (the main product).
* :class:`WorldModelWrapper`: a single-env wrapper for non-group RL libraries.
* :class:`BranchStarts`: groups started from real states of earlier real episodes, played a
  short horizon (``WorldModelVectorEnv(branch_starts=...)``).
"""

from wmrl_env.wrappers.branches import BranchStarts, RealState
from wmrl_env.wrappers.imagined_priorities import imagined_priorities
from wmrl_env.wrappers.info import batch_diagnostics
from wmrl_env.wrappers.rounds import InfrastructureFailureError
from wmrl_env.wrappers.shadows import SHADOWS, AnchorShadow
from wmrl_env.wrappers.single import WorldModelWrapper
from wmrl_env.wrappers.vector import WorldModelVectorEnv

__all__ = [
    "SHADOWS",
    "AnchorShadow",
    "BranchStarts",
    "InfrastructureFailureError",
    "RealState",
    "WorldModelVectorEnv",
    "WorldModelWrapper",
    "batch_diagnostics",
    "imagined_priorities",
]
