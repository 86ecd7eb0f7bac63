"""Doctests of the modules under ``envs/`` (outside ``wmrl_env/``, so pytest does not collect
them itself)."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "wmrl_env.envs.remote.env",
    "wmrl_env.envs.remote.protocol",
    "wmrl_env.envs.robosuite",
    "wmrl_env.envs.robosuite.actions",
    "wmrl_env.envs.robosuite.experts",
    "wmrl_env.envs.robosuite.observations",
    "wmrl_env.envs.libero",
]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0
