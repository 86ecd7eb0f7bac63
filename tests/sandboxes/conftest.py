"""Fixtures shared by the sandbox tests: one factory per backend and leak checks.

``sandbox_factory`` is parametrized over every backend (local always; docker and ray behind
their markers), so a test that takes it runs once per backend with the same assertions.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sandbox_testing import assert_no_process_with

from wmrl_env.sandboxes import LocalSandbox

SandboxFactory = Callable[..., Any]


@pytest.fixture
def marker() -> Iterator[str]:
    """A unique command-line marker; the test fails if a process carrying it outlives it."""
    value = f"wmrl-hostile-{uuid.uuid4().hex}"
    yield value
    assert_no_process_with(value)


@pytest.fixture(scope="session")
def ray_session() -> Iterator[None]:
    """One local Ray instance (2 CPUs, private temp dir, no dashboard) for all Ray tests."""
    import ray

    previous = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    temp_dir = tempfile.mkdtemp(prefix="ray-", dir="/tmp")  # short: socket paths are capped
    ray.init(num_cpus=2, include_dashboard=False, _temp_dir=temp_dir, log_to_driver=False)
    yield
    ray.shutdown()
    shutil.rmtree(temp_dir, ignore_errors=True)
    if previous is None:
        os.environ.pop("RAY_AUTH_MODE", None)
    else:
        os.environ["RAY_AUTH_MODE"] = previous


def _local(**limits: Any) -> Any:
    return LocalSandbox(**limits)


def _local_warm(**limits: Any) -> Any:
    # numpy only: forking from a server is what is tested here; the scikit-learn preload
    # (and scores bit-identical to cold jobs) is tested in test_warm_pool.py
    return LocalSandbox(warm=True, preload=("numpy",), **limits)


def _docker(**limits: Any) -> Any:
    from wmrl_env.sandboxes import DockerSandbox

    return DockerSandbox(**limits)


def _docker_warm(**limits: Any) -> Any:
    from wmrl_env.sandboxes import DockerSandbox

    # one container with numpy: what the fork hands over is tested here; the scikit-learn
    # preload (and scores byte-identical to cold Docker) is tested in test_docker_warm.py
    return DockerSandbox(warm=True, preload=("numpy",), max_workers=1, **limits)


def _ray(**limits: Any) -> Any:
    from wmrl_env.sandboxes import RayExecutor

    return RayExecutor(inner="local", inner_kwargs=limits)


BACKENDS = [
    pytest.param(_local, id="local"),
    pytest.param(_local_warm, id="local-warm"),
    pytest.param(_docker, id="docker", marks=pytest.mark.docker),
    pytest.param(_docker_warm, id="docker-warm", marks=pytest.mark.docker),
    pytest.param(_ray, id="ray", marks=pytest.mark.ray),
]


@pytest.fixture(params=BACKENDS)
def sandbox_factory(request: pytest.FixtureRequest) -> Iterator[SandboxFactory]:
    """Builds sandboxes of one backend and closes them after the test."""
    made: list[Any] = []
    if request.param is _ray:
        request.getfixturevalue("ray_session")

    def make(**limits: Any) -> Any:
        sandbox = request.param(**limits)
        made.append(sandbox)
        return sandbox

    yield make
    for sandbox in made:
        sandbox.close()
        assert leftovers(sandbox) == [], "the closed sandbox left something running"


def leftovers(sandbox: Any) -> list:
    """What a closed sandbox still has running: processes (local) or containers (docker)."""
    if hasattr(sandbox, "live_processes"):
        return sandbox.live_processes()
    if hasattr(sandbox, "sandbox_id"):
        from wmrl_env.sandboxes.docker.engine import LABEL_SANDBOX, connect

        client = connect()
        label = f"{LABEL_SANDBOX}={sandbox.sandbox_id}"
        found = client.containers.list(all=True, filters={"label": label})
        client.close()
        return found
    return []
