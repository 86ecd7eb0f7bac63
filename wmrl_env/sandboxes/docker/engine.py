"""The Docker engine as every Docker sandbox sees it: connecting, labels, leftovers, OOM kills.

Every container a sandbox makes carries labels (``wmrl-env.job``, ``wmrl-env.owner``,
``wmrl-env.sandbox``); :func:`cleanup_leaked_containers` removes the ones whose owner process
is gone. The docker SDK (extra ``docker``) is imported only when a function here is called.

Example:
    >>> _owner_is_gone("another-host:1")  # another machine's container: not ours to judge
    False
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from typing import Any

from wmrl_env.utils.imports import require

__all__ = [
    "DockerUnavailableError",
    "SandboxImageMissingError",
    "check_engine",
    "cleanup_leaked_containers",
    "connect",
    "oom_killed",
    "owner",
]

LABEL_JOB = "wmrl-env.job"
LABEL_OWNER = "wmrl-env.owner"  # "<hostname>:<pid>" of the process that made the container
LABEL_SANDBOX = "wmrl-env.sandbox"

JOB_DIR = "/job"  # a job's work directory, cold or warm
_OOM_EVENT_WAIT_SECONDS = 0.5  # the engine logs an OOM kill at most this long after it
_START_FIX = (
    "start it (as root: `dockerd >/var/log/dockerd.log 2>&1 &`, or "
    "`bash scripts/system.d/10-docker.sh` from a wmrl-env checkout)"
)


class DockerUnavailableError(RuntimeError):
    """The Docker engine cannot be reached; the message says how to start it."""


class SandboxImageMissingError(DockerUnavailableError):
    """The sandbox image is not in the engine; the message names the command that builds it."""


def owner() -> str:
    """This process, as a container's ``wmrl-env.owner`` label names it."""
    return f"{socket.gethostname()}:{os.getpid()}"


def connect(base_url: str | None = None, *, max_pool_size: int = 16) -> Any:
    """A ``docker.DockerClient`` that answers, or :class:`DockerUnavailableError`."""
    docker = require("docker", "DockerSandbox")
    try:
        if base_url:
            client = docker.DockerClient(
                base_url=base_url, version="auto", max_pool_size=max_pool_size
            )
        else:
            client = docker.from_env(version="auto", max_pool_size=max_pool_size)
        client.ping()
    except docker.errors.DockerException as error:
        where = base_url or os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        raise DockerUnavailableError(
            f"cannot reach the Docker engine at {where} ({error}); {_START_FIX}"
        ) from error
    return client


def check_engine(client: Any) -> None:
    """Raise :class:`DockerUnavailableError`, saying how to start the engine, when it no
    longer answers."""
    try:
        client.ping()
    except Exception as error:
        raise DockerUnavailableError(
            f"the Docker engine stopped answering ({error}); {_START_FIX}"
        ) from error


def cleanup_leaked_containers(client: Any = None, *, sandbox_id: str | None = None) -> list[str]:
    """Remove wmrl-env containers left behind; returns the ids removed.

    With ``sandbox_id``: every container of that sandbox. Without: the containers whose owner
    process (on this host) no longer runs, e.g. after the owner was killed.
    """
    docker = require("docker", "cleanup_leaked_containers")
    client = client or connect()
    label = f"{LABEL_SANDBOX}={sandbox_id}" if sandbox_id else LABEL_OWNER
    removed = []
    for container in client.containers.list(all=True, filters={"label": label}):
        if sandbox_id is None and not _owner_is_gone(container.labels.get(LABEL_OWNER, "")):
            continue
        with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
            container.remove(force=True)
            removed.append(container.id)
    return removed


def _owner_is_gone(owner: str) -> bool:
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False  # another machine's container: not ours to judge
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def oom_killed(client: Any, container_id: str, since: float) -> bool:
    """Whether the kernel's OOM killer struck in the container since ``since`` (epoch).

    The engine reports an ``oom`` event at once, but sets ``State.OOMKilled`` only when
    the container itself exits: look for the event, shortly, in the engine's log.
    """
    deadline = time.monotonic() + _OOM_EVENT_WAIT_SECONDS
    while True:
        events = client.api.events(
            since=f"{since:.9f}",
            until=f"{time.time():.9f}",
            filters={"container": container_id, "event": "oom"},
            decode=True,
        )
        if any(True for _ in events):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
