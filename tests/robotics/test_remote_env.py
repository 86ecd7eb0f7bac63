"""SubprocessEnv: a gymnasium environment in a worker process, tested on CartPole (core only)."""

from __future__ import annotations

import os
import signal

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from wmrl_env.envs.remote import RemoteEnvError, SubprocessEnv, WorkerDiedError, step_all

CARTPOLE = "gymnasium.envs.classic_control:CartPoleEnv"


@pytest.fixture
def remote():
    env = SubprocessEnv(CARTPOLE)
    yield env
    env.close()


def test_passes_check_env(remote) -> None:
    check_env(remote, skip_render_check=True)


def test_matches_the_same_env_run_here(remote) -> None:
    local = gym.make("CartPole-v1").unwrapped
    assert remote.observation_space == local.observation_space
    assert remote.action_space == local.action_space
    obs_remote, _ = remote.reset(seed=7)
    obs_local, _ = local.reset(seed=7)
    np.testing.assert_array_equal(obs_remote, obs_local)
    for action in [0, 1, 1, 0, 1]:
        got, want = remote.step(action), local.step(action)
        np.testing.assert_array_equal(got[0], want[0])
        assert got[1:4] == want[1:4]
        assert got[0].dtype == want[0].dtype


def test_worker_exception_is_raised_here_with_its_traceback(remote) -> None:
    remote.reset(seed=0)
    with pytest.raises(RemoteEnvError, match="AssertionError"):
        remote.step(5)  # CartPole asserts on invalid actions
    assert remote.step(0)[0].shape == (4,), "the worker keeps serving after an error"
    with pytest.raises(AttributeError, match="no_such_thing"):
        remote.call("no_such_thing")


def test_call_reads_attributes_and_calls_methods(remote) -> None:
    assert remote.call("gravity") == pytest.approx(9.8)
    assert remote.call("get_wrapper_attr", "length") == pytest.approx(0.5)


def test_snapshot_methods_exist_only_when_the_remote_env_has_them(remote) -> None:
    assert not hasattr(remote, "get_snapshot") and not hasattr(remote, "restore_snapshot")
    with pytest.raises(AttributeError, match="get_snapshot"):
        remote.get_snapshot()


def test_dead_worker_gives_a_clear_error(remote) -> None:
    remote.reset(seed=0)
    os.kill(remote.pid, signal.SIGKILL)  # asynchronous: the request may or may not get out
    died = r"died while (sending|running) step \(exit code -9\)"
    with pytest.raises(WorkerDiedError, match=died):
        remote.step(0)
    remote.close()  # still fine


def test_construction_error_names_the_entry_point() -> None:
    with pytest.raises(RemoteEnvError, match=r"ModuleNotFoundError.*wmrl_env_no_such_module"):
        SubprocessEnv("wmrl_env_no_such_module:Env")
    with pytest.raises(ValueError, match="entry point must look like"):
        SubprocessEnv("not-an-entry-point")


def test_bad_arguments() -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        SubprocessEnv(CARTPOLE, python="/nonexistent/python")
    with pytest.raises(ValueError, match="timeout must be positive"):
        SubprocessEnv(CARTPOLE, timeout=0)


def test_slow_worker_is_killed_after_the_timeout() -> None:
    with pytest.raises(TimeoutError, match="did not answer within"):
        SubprocessEnv(CARTPOLE, start_timeout=0.001)


def test_close_stops_the_worker_and_is_idempotent() -> None:
    env = SubprocessEnv(CARTPOLE)
    process = env._child.process
    assert process.poll() is None
    env.close()
    env.close()
    assert process.poll() is not None, "worker still running after close()"
    with pytest.raises(RuntimeError, match="closed"):
        env.reset()


def test_step_all_runs_workers_side_by_side() -> None:
    envs = [SubprocessEnv(CARTPOLE) for _ in range(2)]
    try:
        for env in envs:
            env.reset(seed=3)
        results = step_all(envs, [0, 0])
        np.testing.assert_array_equal(results[0][0], results[1][0])
        with pytest.raises(ValueError, match="2 environments but 1 actions"):
            step_all(envs, [0])
    finally:
        for env in envs:
            env.close()
