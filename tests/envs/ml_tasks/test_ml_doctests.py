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
    "perturb",
    "build",
    "curate",
    "sandbox",
    "docs_text",
    "encoding",
    "features",
    "rdata",
    "private_test",
    "task_files",
    "grammar",
    "headroom",
    "pool",
    "pool_tasks",
    "realdata",
    "turns",
    "multiturn",
    "reviser",
    "simulator",
    "__init__",
]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name) -> None:
    module_name = "wmrl_env.envs.ml_tasks" + ("" if name == "__init__" else f".{name}")
    module = importlib.import_module(module_name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{module_name} has no doctest"
    assert result.failed == 0


def test_every_module_with_an_example_is_listed() -> None:
    """A new module's doctests run too: every ``>>>`` in the package is in ``MODULES``."""
    from pathlib import Path

    package = Path(importlib.import_module("wmrl_env.envs.ml_tasks").__file__).parent
    with_examples = {path.stem for path in package.glob("*.py") if ">>>" in path.read_text()}
    assert with_examples <= set(MODULES), sorted(with_examples - set(MODULES))
