"""The shared conformance tests for every env with exact snapshots (:class:`SupportsSnapshots`).

A snapshot is what gives every member of a GRPO group the same start: restoring it and
replaying actions must give the original continuation bit for bit, in this env or another
one with a different history, after a trip through pickle; a snapshot that does not fit gives
a clear error and changes nothing.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest

from wmrl_env.env_executors.play import SupportsSnapshots, supports_snapshots

__all__ = ["SnapshotContract"]


def _same(first: Any, second: Any, where: str) -> None:
    """Bit for bit: arrays by dtype, shape and bytes; dicts and sequences item by item."""
    if isinstance(first, dict):
        assert isinstance(second, dict) and first.keys() == second.keys(), where
        for key in first:
            _same(first[key], second[key], f"{where}[{key!r}]")
    elif isinstance(first, list | tuple):
        assert isinstance(second, list | tuple) and len(first) == len(second), where
        for i, (a, b) in enumerate(zip(first, second, strict=True)):
            _same(a, b, f"{where}[{i}]")
    else:
        a, b = np.asarray(first), np.asarray(second)
        assert a.dtype == b.dtype and a.shape == b.shape, f"{where}: {a!r} != {b!r}"
        assert a.tobytes() == b.tobytes(), f"{where}: {a!r} != {b!r}"


def _get_snapshot(env: Any) -> Any:
    return _method(env, "get_snapshot")()


def _restore(env: Any, snapshot: Any) -> tuple[Any, dict[str, Any]]:
    return _method(env, "restore_snapshot")(snapshot)


def _method(env: Any, name: str) -> Any:
    """The env's method, through gymnasium wrappers (``gym.make`` adds some)."""
    get = getattr(env, "get_wrapper_attr", None)
    return get(name) if callable(get) else getattr(env, name)


class SnapshotContract:
    """Mixin for envs with ``get_snapshot()`` / ``restore_snapshot(snapshot) -> (obs, info)``.

    Hooks: :meth:`make_env` (an env, wrapped or not; called twice per test class: the env and a
    second one with its own history) and, optionally, :meth:`bad_snapshots`. The snapshot is
    taken ``steps_before`` steps after ``reset(seed=first_seed)``; the continuation is
    ``steps_after`` steps of seeded random actions (fewer where the episode ends).

    Set ``restore_after_same_reset`` for envs whose model depends on the reset (robosuite's
    Door places the door in the model): the second env is then reset with ``first_seed``
    before the restore, as :class:`~wmrl_env.env_executors.play.EnvJob` does (reset with the
    group's seed, then restore).

    Example (in ``tests/robotics/test_my_env.py``)::

        class TestMyEnvSnapshots(SnapshotContract):
            def make_env(self): return MyEnv()
    """

    first_seed: int = 1
    other_seed: int = 2
    steps_before: int = 3
    steps_after: int = 8
    restore_after_same_reset: bool = False

    def make_env(self) -> Any:
        raise NotImplementedError

    def bad_snapshots(self, snapshot: Any) -> list[Any]:
        """Snapshots the env must refuse; default: not a snapshot at all, and an empty dict."""
        return ["not a snapshot", {}]

    # -- fixtures ------------------------------------------------------------------------------

    @pytest.fixture(scope="class")
    @classmethod
    def envs(cls) -> Iterator[tuple[Any, Any]]:
        first, second = cls().make_env(), cls().make_env()
        yield first, second
        for env in (first, second):
            env.close()

    def _actions(self, env: Any, n: int, seed: int) -> list[Any]:
        space = env.action_space
        space.seed(seed)
        return [space.sample() for _ in range(n)]

    def _rollout(self, env: Any, actions: Sequence[Any]) -> list[tuple]:
        """``(obs, reward, terminated, truncated)`` per step, up to the episode's end."""
        steps = []
        for action in actions:
            obs, reward, terminated, truncated, _ = env.step(action)
            steps.append((obs, float(reward), bool(terminated), bool(truncated)))
            if terminated or truncated:
                break
        return steps

    @pytest.fixture
    def start(self, envs) -> tuple[Any, Any, list[Any], list[tuple]]:
        return self.take_start(envs[0])

    def take_start(self, env: Any) -> tuple[Any, Any, list[Any], list[tuple]]:
        """Reset, step, take the snapshot and play on: the snapshot, the observation when it
        was taken, the actions after it and the original continuation."""
        obs, _ = env.reset(seed=self.first_seed)
        for step in self._rollout(env, self._actions(env, self.steps_before, seed=0)):
            obs = step[0]
        snapshot = _get_snapshot(env)
        actions = self._actions(env, self.steps_after, seed=1)
        return snapshot, obs, actions, self._rollout(env, actions)

    # -- the contract --------------------------------------------------------------------------

    def test_offers_snapshots(self, envs) -> None:
        assert supports_snapshots(envs[0])
        assert isinstance(envs[0].unwrapped, SupportsSnapshots)

    def test_restore_then_replay_is_the_original_continuation(self, envs, start) -> None:
        snapshot, obs_at_snapshot, actions, original = start
        env = envs[0]
        self._rollout(env, self._actions(env, 4, seed=2))  # move on, then come back
        obs, info = _restore(env, snapshot)
        assert isinstance(info, dict)
        _same(obs, obs_at_snapshot, "observation after restore")
        _same(self._rollout(env, actions), original, "replay")

    def test_restore_into_an_env_with_a_different_history(self, envs, start) -> None:
        snapshot, obs_at_snapshot, actions, original = start
        other = envs[1]
        other.reset(seed=self.other_seed)
        self._rollout(other, self._actions(other, 5, seed=3))
        if self.restore_after_same_reset:
            other.reset(seed=self.first_seed)
        obs, _ = _restore(other, snapshot)
        _same(obs, obs_at_snapshot, "observation after restore")
        _same(self._rollout(other, actions), original, "replay in the other env")

    def test_snapshot_survives_pickling(self, envs, start) -> None:
        snapshot, _, actions, original = start
        env = envs[0]
        _restore(env, pickle.loads(pickle.dumps(snapshot)))
        _same(self._rollout(env, actions), original, "replay from the unpickled snapshot")

    def test_bad_snapshot_is_refused_clearly_and_changes_nothing(self, envs, start) -> None:
        snapshot, _, actions, original = start
        env = envs[0]
        for bad in self.bad_snapshots(snapshot):
            _restore(env, snapshot)
            with pytest.raises((ValueError, TypeError)) as refused:
                _restore(env, bad)
            assert str(refused.value), f"restore_snapshot({bad!r}) raised without a message"
            _same(self._rollout(env, actions), original, f"replay after refusing {bad!r}")
