"""``$WMRL_ALLOW_WEAK_ISOLATION`` covers the suite's own programs only: ``MLTaskEnv``'s
actions (arbitrary programs) run weakly only when the caller passes the opt-in in code."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

import wmrl_env.sandboxes
from wmrl_env.envs.ml_tasks import MLTaskEnv
from wmrl_env.envs.ml_tasks.sandbox import ALLOW_WEAK_VARIABLE, default_sandbox


class RecordingSandbox:
    """Stands in for LocalSandbox (its neighbour here): records what it was asked for."""

    made: ClassVar[list[dict[str, Any]]] = []

    def __init__(self, **kwargs: Any) -> None:
        RecordingSandbox.made.append(kwargs)

    def close(self) -> None:
        pass


@pytest.fixture
def recorded(monkeypatch) -> list[dict[str, Any]]:
    RecordingSandbox.made = []
    monkeypatch.setattr(wmrl_env.sandboxes, "LocalSandbox", RecordingSandbox)
    monkeypatch.setenv(ALLOW_WEAK_VARIABLE, "1")
    return RecordingSandbox.made


def test_the_environment_variable_does_not_cover_the_envs_text_actions(recorded) -> None:
    env = MLTaskEnv(tasks=["iris"], executor="local", action_mode="text")
    env._get_executor()
    env.close()
    assert [made["allow_weak_isolation"] for made in recorded] == [False]


def test_the_environment_variable_covers_the_suites_own_programs(recorded) -> None:
    default_sandbox(max_workers=1, suite_programs=True)
    default_sandbox(max_workers=1)
    default_sandbox(max_workers=1, allow_weak_isolation=True)
    assert [made["allow_weak_isolation"] for made in recorded] == [True, False, True]


def test_without_the_variable_only_code_opts_in(recorded, monkeypatch) -> None:
    monkeypatch.delenv(ALLOW_WEAK_VARIABLE)
    default_sandbox(max_workers=1, suite_programs=True)
    assert [made["allow_weak_isolation"] for made in recorded] == [False]
