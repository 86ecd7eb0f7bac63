"""The Docker sandbox's public names and engine helpers where they were first imported from;
the code lives in :mod:`wmrl_env.sandboxes.docker`."""

from wmrl_env.sandboxes.docker.engine import (
    LABEL_JOB,
    LABEL_OWNER,
    LABEL_SANDBOX,
    DockerUnavailableError,
    SandboxImageMissingError,
    check_engine,
    cleanup_leaked_containers,
    connect,
)
from wmrl_env.sandboxes.docker.sandbox import DockerSandbox

__all__ = [
    "LABEL_JOB",
    "LABEL_OWNER",
    "LABEL_SANDBOX",
    "DockerSandbox",
    "DockerUnavailableError",
    "SandboxImageMissingError",
    "check_engine",
    "cleanup_leaked_containers",
    "connect",
]
