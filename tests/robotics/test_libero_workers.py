"""LIBERO workers live across rounds: reused (same processes), exact, replaced when killed.

Real LIBERO-Long task 0 in its own interpreter (marker ``libero``), at most three workers at
once (each holds about 1.3 GB).
"""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest

from wmrl_env.env_executors import EnvJob, GymEnvExecutor
from wmrl_env.executors.base import ExecStatus
from wmrl_env.fusion import RewardFusion
from wmrl_env.sandboxes.processes import parent_pid
from wmrl_env.world_models.base import StepPrediction
from wmrl_env.wrappers import WorldModelVectorEnv

pytestmark = [pytest.mark.libero, pytest.mark.slow]

HORIZON = 12


def libero_env(horizon: int = HORIZON):
    from wmrl_env.envs.libero import make_libero_env

    return make_libero_env(suite="libero_10", task_id=0, horizon=horizon)


def worker_pids() -> set[int]:
    """The LIBERO worker processes this test process runs (children of any of its threads)."""
    parents = {pid: parent_pid(pid) for pid in map(int, filter(str.isdigit, os.listdir("/proc")))}
    descendants, frontier = set(), [os.getpid()]
    while frontier:
        parent = frontier.pop()
        for pid, its_parent in parents.items():
            if its_parent == parent and pid not in descendants:
                descendants.add(pid)
                frontier.append(pid)
    return {pid for pid in descendants if "wmrl_env.envs.remote.worker" in _command(pid)}


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return cmdline.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:  # gone meanwhile
        return ""


class StillModel:
    """A dynamics world model in which nothing moves and nothing succeeds."""

    def predict_step(self, observations: np.ndarray, actions: np.ndarray) -> StepPrediction:
        n = len(observations)
        return StepPrediction(np.asarray(observations), np.zeros(n), np.zeros(n, dtype=bool))


def _actions(seed: int, n: int) -> tuple[np.ndarray, ...]:
    return tuple(np.random.default_rng(seed).uniform(-1, 1, (n, 7)).astype(np.float32))


def test_workers_are_reused_across_rounds_and_match_a_fresh_worker_bit_for_bit() -> None:
    before = worker_pids()
    executor = GymEnvExecutor(libero_env, backend="thread", num_workers=2)
    envs = WorldModelVectorEnv(
        libero_env,
        StillModel(),
        num_groups=3,
        group_size=2,
        fusion=RewardFusion("wmrl", anchor_fraction=0.25, seed=0),
        executor=executor,
        task="dynamics",
        max_episode_steps=HORIZON,
    )
    fresh = None
    try:
        per_round = []
        for round_index in range(3):
            envs.reset(seed=round_index)
            done = np.zeros(envs.num_envs, dtype=bool)
            rng = np.random.default_rng(round_index)
            while not done.all():
                actions = rng.uniform(-1, 1, envs.action_space.shape).astype(np.float32)
                _, _, terminated, truncated, info = envs.step(actions)
                done = terminated | truncated
            assert (info["exec_status"][info["is_anchor"]] == "ok").all(), info["exec_message"]
            per_round.append(worker_pids() - before)
        # one anchor group of two members a round: two live workers, the same three rounds long
        assert len(per_round[0]) == 2, per_round
        assert per_round[1] == per_round[0] and per_round[2] == per_round[0], per_round

        # a worker with three rounds behind it replays a snapshot exactly like a fresh one
        (start,) = executor.run([EnvJob(seed=5, capture_snapshot=True)])
        job = EnvJob(actions=_actions(1, 6), seed=5, snapshot=start.metadata["snapshot"])
        (reused,) = executor.run([job])
        assert worker_pids() - before == per_round[0], "the replay started a worker"
        fresh = libero_env()
        fresh.reset(seed=99)
        observation, _ = fresh.restore_snapshot(start.metadata["snapshot"])
        steps = [fresh.step(action) for action in job.actions]
        np.testing.assert_array_equal(observation, reused.metadata["start_observation"])
        np.testing.assert_array_equal(steps[-1][0], reused.metadata["observation"])
        assert tuple(s[1] for s in steps) == reused.metadata["rewards"]
    finally:
        envs.close()
        if fresh is not None:
            fresh.close()
    assert not (worker_pids() - before), "close() left LIBERO workers running"


def test_a_killed_worker_fails_its_job_clearly_and_is_replaced() -> None:
    before = worker_pids()
    with GymEnvExecutor(lambda: libero_env(horizon=5000), backend="thread", max_envs=1) as ex:
        (warm,) = ex.run([EnvJob(seed=0)])  # start the worker
        assert warm.ok
        (pid,) = worker_pids() - before
        (future,) = ex.submit([EnvJob(actions=_actions(2, 4000), seed=0)])  # tens of seconds
        time.sleep(3.0)
        assert not future.done(), "the job ended before the worker could be killed"
        os.kill(pid, signal.SIGKILL)
        killed = future.result(timeout=120)
        assert killed.status is ExecStatus.ERROR  # infrastructure: the episode's outcome is unknown
        assert "died while running step (exit code -9)" in killed.message, killed.message
        (after,) = ex.run([EnvJob(actions=_actions(3, 2), seed=0)])
        assert after.ok and after.metadata["steps"] == 2
        (replacement,) = worker_pids() - before
        assert replacement != pid
    assert not (worker_pids() - before)
