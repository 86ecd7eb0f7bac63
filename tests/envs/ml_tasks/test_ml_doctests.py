"""Run the doctests of the ML task modules (they live in envs/, outside pytest's doctest
collection, which covers wmrl_env/)."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "datasets",
    "synthetic",
    "scoring",
    "programs",
    "tasks",
    "description",
    "registry",
    "tables",
    "env",
    "__init__",
]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name) -> None:
    module_name = "wmrl_env.envs.ml_tasks" + ("" if name == "__init__" else f".{name}")
    module = importlib.import_module(module_name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{module_name} has no doctest"
    assert result.failed == 0
