"""``GymEnvExecutor`` on every backend: the shared Executor contract, slots, snapshots, failures."""

from __future__ import annotations

import math
import os
import time

import gymnasium as gym
import numpy as np
import pytest
from testing_env import GenericTestEnv, SnapshotPointMassEnv

from wmrl_env.env_executors.gym_env import EnvJob, GymEnvExecutor
from wmrl_env.executors.base import ExecStatus
from wmrl_env.testing import ExecutorContract


def _counter_reset(env, seed, options):
    env.state = seed or 0
    return np.array([env.state], dtype=np.float32), {}


def _counter_step(env, action):
    if action < 0:
        raise ValueError("negative action")
    if action == 99:
        os._exit(3)  # a simulator that segfaults
    if action == 98:
        time.sleep(30)
    if action == 97:
        return np.array([env.state], dtype=np.float32), math.nan, True, False, {}
    if action == 96:
        return np.array([env.state], dtype=np.float32), 1.0, True, False, {}
    env.state += 1
    return np.array([env.state], dtype=np.float32), 10.0 * env.state + action, False, False, {}


def counter_env() -> gym.Env:
    """reset(seed=s) -> state s; step(a) -> state + 1, reward 10 * state + a."""
    return GenericTestEnv(
        observation_space=gym.spaces.Box(-1e6, 1e6, (1,), np.float32),
        action_space=gym.spaces.Discrete(100),
        reset_func=_counter_reset,
        step_func=_counter_step,
    )


class _Contract(ExecutorContract):
    backend = "inline"

    def make_executor(self):
        return GymEnvExecutor(counter_env, backend=self.backend, num_workers=2)

    def make_ok_job(self, i):
        return EnvJob(actions=(i % 3,), seed=i)

    def expected_score(self, i):
        return 10.0 * (i + 1) + i % 3

    def make_failing_job(self):
        return EnvJob(actions=(1, -1), seed=0)


class TestInlineContract(_Contract):
    backend = "inline"


class TestThreadContract(_Contract):
    backend = "thread"


class TestProcessContract(_Contract):
    backend = "process"


@pytest.fixture(params=["inline", "thread", "process"])
def executor(request):
    executor = GymEnvExecutor(counter_env, backend=request.param, num_workers=2)
    yield executor
    executor.close()


def test_result_metadata_describes_the_episode(executor) -> None:
    (result,) = executor.run([EnvJob(actions=(1, 2), seed=5)])
    meta = result.metadata
    assert result.score == pytest.approx(61.0 + 72.0)
    assert meta["rewards"] == (61.0, 72.0) and meta["steps"] == 2
    np.testing.assert_array_equal(meta["start_observation"], [5.0])
    np.testing.assert_array_equal(meta["observation"], [7.0])
    assert meta["terminated"] is False and meta["truncated"] is False


def test_slot_keeps_its_episode_between_jobs(executor) -> None:
    first = executor.run(
        [EnvJob(actions=(0,), seed=3, slot=1), EnvJob(actions=(0,), seed=7, slot=2)]
    )
    second = executor.run(
        [EnvJob(actions=(0,), slot=1, reset=False), EnvJob(actions=(1,), slot=2, reset=False)]
    )
    assert [r.score for r in first] == [40.0, 80.0]
    assert [r.score for r in second] == [50.0, 91.0]


def test_continuing_a_slot_without_an_episode_is_an_error_result(executor) -> None:
    (result,) = executor.run([EnvJob(actions=(0,), slot=4, reset=False)])
    assert result.status is ExecStatus.ERROR and "no episode in progress" in result.message


def test_failed_slot_loses_its_episode_but_not_the_others(executor) -> None:
    executor.run([EnvJob(actions=(0,), seed=1, slot=0), EnvJob(actions=(0,), seed=1, slot=1)])
    failed, fine = executor.run(
        [EnvJob(actions=(-1,), slot=0, reset=False), EnvJob(actions=(0,), slot=1, reset=False)]
    )
    assert failed.status is ExecStatus.ERROR and "step 0 raised ValueError" in failed.message
    assert fine.ok and fine.score == 30.0
    (after,) = executor.run([EnvJob(actions=(0,), slot=0, reset=False)])
    assert after.status is ExecStatus.ERROR


def test_non_finite_reward_is_invalid_output(executor) -> None:
    (result,) = executor.run([EnvJob(actions=(97,), seed=0)])
    assert result.status is ExecStatus.INVALID_OUTPUT and math.isnan(result.score)


def test_reset_only_job_returns_start_and_no_score(executor) -> None:
    (result,) = executor.run([EnvJob(seed=9)])
    assert result.ok and math.isnan(result.score)
    np.testing.assert_array_equal(result.metadata["start_observation"], [9.0])


def test_describe_reports_spaces(executor) -> None:
    description = executor.describe()
    assert description.action_space == gym.spaces.Discrete(100)
    assert description.has_snapshots is False


@pytest.mark.parametrize("backend", ["thread", "process"])
def test_snapshot_restores_the_exact_start(backend) -> None:
    with GymEnvExecutor(SnapshotPointMassEnv, backend=backend, num_workers=2) as ex:
        assert ex.describe().has_snapshots
        (start,) = ex.run([EnvJob(seed=0, capture_snapshot=True)])
        snapshot = start.metadata["snapshot"]
        replays = ex.run(
            [EnvJob(actions=(np.array([0.5], np.float32),), snapshot=snapshot) for _ in range(4)]
        )
    starts = [r.metadata["start_observation"] for r in replays]
    for observation in starts:
        np.testing.assert_array_equal(observation, start.metadata["start_observation"])
    assert len({r.score for r in replays}) == 1


def test_episode_end_stops_the_actions(executor) -> None:
    (result,) = executor.run([EnvJob(actions=(0, 96, 0, 0), seed=1)])
    assert result.metadata["steps"] == 2 and result.metadata["terminated"]
    assert result.score == pytest.approx(20.0 + 1.0)


def test_process_worker_crash_is_a_result_and_the_worker_restarts() -> None:
    with GymEnvExecutor(counter_env, backend="process", num_workers=1) as executor:
        crashed, after = executor.run([EnvJob(actions=(99,), seed=0), EnvJob(actions=(0,), seed=2)])
    # a dead worker is an infrastructure failure (issue 23): missing, not scored
    assert crashed.status is ExecStatus.ERROR and "exit code 3" in crashed.message
    assert after.ok and after.score == 30.0


def test_process_timeout_kills_the_job_only() -> None:
    with GymEnvExecutor(counter_env, backend="process", num_workers=1, timeout_s=1.0) as executor:
        slow, after = executor.run([EnvJob(actions=(98,), seed=0), EnvJob(actions=(0,), seed=2)])
    assert slow.status is ExecStatus.TIMEOUT and "restarted" in slow.message
    assert after.ok


def test_factory_failure_is_a_result() -> None:
    def broken():
        raise OSError("simulator license expired")

    with GymEnvExecutor(broken, backend="thread") as executor:
        (result,) = executor.run([EnvJob(actions=(0,), seed=0)])
    assert result.status is ExecStatus.ERROR and "license expired" in result.message


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="backend"):
        GymEnvExecutor(counter_env, backend="gpu")
    with pytest.raises(ValueError, match="process"):
        GymEnvExecutor(counter_env, backend="thread", timeout_s=1.0)
    with pytest.raises(TypeError, match="callable"):
        GymEnvExecutor(counter_env(), backend="thread")
    with GymEnvExecutor(counter_env, backend="inline") as executor, pytest.raises(TypeError):
        executor.submit(["not a job"])


def _fail_to_load() -> None:
    raise RuntimeError("env_fn cannot be loaded in the worker")


class _UnloadableFactory:
    """Pickles fine, but unpickling it (in the worker) raises."""

    def __call__(self) -> gym.Env:
        return counter_env()

    def __reduce__(self):
        return (_fail_to_load, ())


def test_process_worker_that_cannot_start_is_an_infrastructure_error() -> None:
    with GymEnvExecutor(_UnloadableFactory(), backend="process", num_workers=1) as executor:
        (result,) = executor.run([EnvJob(actions=(0,), seed=0)])
    assert result.status is ExecStatus.ERROR and "did not start" in result.message


def test_an_env_reporting_its_execution_seconds_is_charged_them() -> None:
    def step(env, action):
        return 0, 1.0, True, False, {"exec_seconds": 7.5}

    with GymEnvExecutor(lambda: GenericTestEnv(step_func=step), backend="inline") as executor:
        [result] = executor.run([EnvJob(actions=(0,), seed=0)])
    assert result.ok and result.exec_seconds == 7.5 and result.wall_seconds < 7.5
