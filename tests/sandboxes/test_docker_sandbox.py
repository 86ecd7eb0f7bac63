"""DockerSandbox against a real Docker engine and the real sandbox image (marker ``docker``)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys

import pytest
from sandbox_testing import SandboxContract, marked, wait_for_process_with

from wmrl_env.executors import ExecStatus
from wmrl_env.sandboxes import (
    DockerSandbox,
    DockerUnavailableError,
    Job,
    SandboxImageMissingError,
    cleanup_leaked_containers,
)
from wmrl_env.sandboxes.docker import engine
from wmrl_env.sandboxes.docker import sandbox as sandbox_module

pytestmark = pytest.mark.docker


class TestDockerSandboxContract(SandboxContract):
    def make_executor(self) -> DockerSandbox:
        return DockerSandbox(timeout_s=60, memory_mb=512)


@pytest.fixture(scope="module")
def sandbox():
    with DockerSandbox(timeout_s=60, memory_mb=1024) as sandbox:
        yield sandbox


def containers_of(sandbox: DockerSandbox) -> list:
    label = f"{engine.LABEL_SANDBOX}={sandbox.sandbox_id}"
    return sandbox._client.containers.list(all=True, filters={"label": label})


def test_memory_bomb_is_killed_by_the_cgroup(sandbox) -> None:
    program = "hoard = []\nwhile True:\n    hoard.append(bytearray(10**7))\n"
    with DockerSandbox(timeout_s=60, memory_mb=128) as small:
        [result] = small.run([Job(program)])
    assert result.status is ExecStatus.OUT_OF_MEMORY, result
    assert "OOM killer" in result.message


@pytest.mark.slow
def test_containers_are_labelled_while_running_and_removed_after(marker) -> None:
    with DockerSandbox(timeout_s=5) as sandbox:
        job = Job(marked("import time\ntime.sleep(60)\n", marker))
        future = sandbox.submit([job])[0]
        wait_for_process_with(marker)
        [container] = containers_of(sandbox)
        assert container.labels[engine.LABEL_JOB] == job.job_id
        owner = container.labels[engine.LABEL_OWNER]
        assert owner == f"{socket.gethostname()}:{os.getpid()}"
        assert future.result(timeout=120).status is ExecStatus.TIMEOUT
        assert containers_of(sandbox) == []


def test_cleanup_removes_containers_of_dead_owners(sandbox) -> None:
    finished = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    client = sandbox._client
    labelled = {}
    for who, pid in (("dead", finished.stdout.strip()), ("alive", str(os.getpid()))):
        owner = {engine.LABEL_OWNER: f"{socket.gethostname()}:{pid}"}
        labelled[who] = client.containers.create(sandbox.image, ["sleep", "300"], labels=owner)
    try:
        removed = cleanup_leaked_containers(client)
        assert labelled["dead"].id in removed and labelled["alive"].id not in removed
    finally:
        for container in labelled.values():
            with contextlib.suppress(engine.require("docker").errors.NotFound):
                container.remove(force=True)


def test_engine_down_is_a_clear_error() -> None:
    with pytest.raises(DockerUnavailableError, match="dockerd"):
        DockerSandbox(base_url="unix:///nonexistent/docker.sock")


def test_missing_image_names_the_fix(monkeypatch) -> None:
    with pytest.raises(SandboxImageMissingError, match="docker build"):
        DockerSandbox(image="wmrl-sandbox:no-such-tag")
    monkeypatch.setattr(sandbox_module, "default_image", lambda: "wmrl-sandbox:not-built")
    with pytest.raises(SandboxImageMissingError, match="wmrl build-image"):
        DockerSandbox()


@pytest.mark.parametrize("gpus", [0, "some", 1.5])
def test_bad_gpu_request_is_refused(gpus) -> None:
    with pytest.raises(ValueError, match="gpus"):
        DockerSandbox(gpus=gpus)
