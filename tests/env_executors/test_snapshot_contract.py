"""The snapshot contract on the test envs: the point mass, bare and behind gymnasium wrappers."""

from __future__ import annotations

import gymnasium as gym
from testing_env import SnapshotPointMassEnv

from wmrl_env.testing import SnapshotContract


class TestPointMassSnapshots(SnapshotContract):
    def make_env(self) -> SnapshotPointMassEnv:
        return SnapshotPointMassEnv()


class TestWrappedPointMassSnapshots(SnapshotContract):
    """Wrappers (here ``RecordEpisodeStatistics``, ``OrderEnforcing``) pass snapshots through."""

    def make_env(self) -> gym.Env:
        env = gym.wrappers.RecordEpisodeStatistics(SnapshotPointMassEnv())
        return gym.wrappers.OrderEnforcing(env)


def test_the_contract_catches_an_env_whose_restore_forgets_state() -> None:
    """A restore that drops part of the state (the step counter here) fails the contract."""

    class Forgetful(SnapshotPointMassEnv):
        def step(self, action):
            obs, reward, terminated, truncated, info = super().step(action)
            return obs, reward + self._t, terminated, truncated, info

        def restore_snapshot(self, snapshot):
            obs, info = super().restore_snapshot(snapshot)
            self._t = 0
            return obs, info

    class Check(SnapshotContract):
        def make_env(self):
            return Forgetful()

    check, env = Check(), Forgetful()
    start = check.take_start(env)
    try:
        check.test_restore_then_replay_is_the_original_continuation((env, env), start)
    except AssertionError as error:
        assert "replay" in str(error)
    else:
        raise AssertionError("the contract passed an env that forgets its step counter")
