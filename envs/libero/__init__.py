"""LIBERO through LIBERO's own API, in this interpreter or in a dedicated one (extra ``libero``).

LIBERO pins robosuite 1.4; wmrl-env's robosuite tasks use robosuite 1.5. The two cannot share
a Python environment, so LIBERO usually lives in its own (``bash scripts/setup-robotics.sh``
creates ``.venv-libero``) and :func:`make_libero_env` drives it from the main one through
:class:`~wmrl_env.envs.remote.SubprocessEnv`. Where LIBERO is importable here, it is used
directly.

Importing this module registers ``wmrl/LIBERO-Long-v0`` (``libero_10``) and the other four
standard suites.

Example:
    >>> import gymnasium as gym
    >>> import wmrl_env.envs.libero
    >>> gym.spec("wmrl/LIBERO-Long-v0").kwargs
    {'suite': 'libero_10'}
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import gymnasium as gym

from wmrl_env.envs.libero.config import ensure_libero_config
from wmrl_env.utils.imports import MissingDependencyError, is_available

__all__ = [
    "PYTHON_VARIABLE",
    "SUITES",
    "ensure_libero_config",
    "find_libero_python",
    "make_libero_env",
]

#: registered name -> LIBERO suite
SUITES = {
    "LIBERO-Spatial": "libero_spatial",
    "LIBERO-Object": "libero_object",
    "LIBERO-Goal": "libero_goal",
    "LIBERO-90": "libero_90",
    "LIBERO-Long": "libero_10",
}
#: environment variable naming the interpreter that has LIBERO installed
PYTHON_VARIABLE = "WMRL_LIBERO_PYTHON"
_DEFAULT_VENV = Path(".venv-libero") / "bin" / "python"


def find_libero_python() -> Path | None:
    """The interpreter with LIBERO: ``$WMRL_LIBERO_PYTHON``, else ``.venv-libero`` in the
    current directory or in the wmrl-env checkout; ``None`` when there is none."""
    configured = os.environ.get(PYTHON_VARIABLE)
    if configured:
        return Path(configured)
    checkout = Path(__file__).resolve().parents[2]
    for candidate in (Path.cwd() / _DEFAULT_VENV, checkout / _DEFAULT_VENV):
        if candidate.is_file():
            return candidate
    return None


def make_libero_env(python: str | os.PathLike[str] | None = None, **kwargs: Any) -> gym.Env:
    """A :class:`~wmrl_env.envs.libero.env.LiberoEnv`, here if LIBERO is importable, else in
    a worker running ``python`` (default :func:`find_libero_python`).

    ``kwargs`` go to ``LiberoEnv`` (``suite``, ``task_id``, ``observation_mode``, ...).
    Camera mode in a worker renders with ``MUJOCO_GL=egl`` unless ``MUJOCO_GL`` is set.
    """
    if python is None and is_available("libero"):
        from wmrl_env.envs.libero.env import LiberoEnv

        return LiberoEnv(**kwargs)
    python = python or find_libero_python()
    if python is None or not Path(python).is_file():
        raise MissingDependencyError(
            "LIBERO is not installed in this interpreter and no LIBERO interpreter was found "
            f"(checked ${PYTHON_VARIABLE} and ./{_DEFAULT_VENV}). Create one with "
            "`bash scripts/setup-robotics.sh`, or `pip install 'wmrl-env[libero]'` in a separate "
            f"environment and set {PYTHON_VARIABLE} to its python."
        )
    from wmrl_env.envs.remote import SubprocessEnv

    env_vars = {"MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    return SubprocessEnv(
        "wmrl_env.envs.libero.env:LiberoEnv", kwargs=kwargs, python=python, env_vars=env_vars
    )


for _name, _suite in SUITES.items():
    if f"wmrl/{_name}-v0" not in gym.registry:
        gym.register(
            f"wmrl/{_name}-v0",
            entry_point="wmrl_env.envs.libero:make_libero_env",
            kwargs={"suite": _suite},
        )
