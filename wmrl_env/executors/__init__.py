"""Real execution: the Executor contract and its backends.

Backends with heavy dependencies (Docker, Ray) import them only when constructed.
"""

from wmrl_env.executors.base import (
    BaseExecutor,
    ExecResult,
    ExecStatus,
    Executor,
    ExecutorClosedError,
    InvalidOutputError,
    Job,
    Scorer,
)
from wmrl_env.executors.cache import CachedExecutor
from wmrl_env.executors.docker_sandbox import (
    DockerSandbox,
    DockerUnavailableError,
    SandboxImageMissingError,
    cleanup_leaked_containers,
)
from wmrl_env.executors.image import build_image, default_image
from wmrl_env.executors.limits import SandboxLimits
from wmrl_env.executors.local import LocalSandbox, SandboxUnavailableError
from wmrl_env.executors.ray_executor import RayExecutor
from wmrl_env.executors.scoring import JsonScore, apply_scorer

__all__ = [
    "BaseExecutor",
    "CachedExecutor",
    "DockerSandbox",
    "DockerUnavailableError",
    "ExecResult",
    "ExecStatus",
    "Executor",
    "ExecutorClosedError",
    "InvalidOutputError",
    "Job",
    "JsonScore",
    "LocalSandbox",
    "RayExecutor",
    "SandboxImageMissingError",
    "SandboxLimits",
    "SandboxUnavailableError",
    "Scorer",
    "apply_scorer",
    "build_image",
    "cleanup_leaked_containers",
    "default_image",
]
