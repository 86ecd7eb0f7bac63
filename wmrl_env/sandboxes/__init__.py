"""Program sandboxes: run a Python program (a :class:`Job`) for real and score its outputs.

Backends: :class:`LocalSandbox` (bubblewrap or rlimits on this machine), :class:`DockerSandbox`
(one container per job), :class:`RayExecutor` (either, on a Ray cluster); wrappers around any
of them: :class:`CachedExecutor` (content-addressed results) and
:class:`ReplayExecutor` (recorded executions). Backends with heavy
dependencies (Docker, Ray) import them only when constructed.

Example:
    >>> from wmrl_env.sandboxes import Job, JsonScore
    >>> job = Job(program="print(1)", output_files=["score.json"], scorer=JsonScore("score.json"))
    >>> job.output_files
    ('score.json',)
"""

from wmrl_env.sandboxes.cache import CachedExecutor
from wmrl_env.sandboxes.docker.engine import (
    DockerUnavailableError,
    SandboxImageMissingError,
    cleanup_leaked_containers,
)
from wmrl_env.sandboxes.docker.sandbox import DockerSandbox
from wmrl_env.sandboxes.image import build_image, default_image
from wmrl_env.sandboxes.job import InvalidOutputError, Job, Scorer
from wmrl_env.sandboxes.limits import SandboxLimits
from wmrl_env.sandboxes.local import LocalSandbox, SandboxUnavailableError
from wmrl_env.sandboxes.pregate import KnownOutcomes, PreGate
from wmrl_env.sandboxes.ray_executor import RayExecutor
from wmrl_env.sandboxes.replay import ReplayExecutor, ReplayRecord
from wmrl_env.sandboxes.scoring import JsonScore, apply_scorer
from wmrl_env.sandboxes.syntax import does_not_parse

__all__ = [
    "CachedExecutor",
    "DockerSandbox",
    "DockerUnavailableError",
    "InvalidOutputError",
    "Job",
    "JsonScore",
    "KnownOutcomes",
    "LocalSandbox",
    "PreGate",
    "RayExecutor",
    "ReplayExecutor",
    "ReplayRecord",
    "SandboxImageMissingError",
    "SandboxLimits",
    "SandboxUnavailableError",
    "Scorer",
    "apply_scorer",
    "build_image",
    "cleanup_leaked_containers",
    "default_image",
    "does_not_parse",
]
