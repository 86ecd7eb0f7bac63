"""LIBERO-Long through LIBERO's own API, in its own interpreter (robosuite 1.4), driven from here.

Needs the LIBERO interpreter made by ``bash scripts/setup-robotics.sh`` (marker ``libero``).
"""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from robotics_helpers import assert_bitwise_equal, rollout

from wmrl_env.testing import SnapshotContract

pytestmark = [pytest.mark.libero, pytest.mark.slow]

WORKER_ENVS = str(Path(__file__).parent / "worker_envs")
NOOP = np.array([0, 0, 0, 0, 0, 0, -1], dtype=np.float32)


def _make(**kwargs):
    from wmrl_env.envs.libero import make_libero_env

    return make_libero_env(**{"suite": "libero_10", "task_id": 0, "horizon": 30, **kwargs})


@pytest.fixture(scope="module")
def libero():
    env = _make()
    yield env
    env.close()


def _actions(seed: int, n: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, (n, 7)).astype(np.float32)


def test_runs_in_its_own_interpreter_and_passes_check_env(libero) -> None:
    from wmrl_env.envs.remote import SubprocessEnv

    assert isinstance(libero, SubprocessEnv), "LIBERO must not be importable in the main venv"
    assert libero.call("task_name").startswith("LIVING_ROOM_SCENE")
    check_env(libero, skip_render_check=True)


def test_registered_id_and_task_metadata(libero) -> None:
    import wmrl_env.envs.libero  # noqa: F401

    assert gym.spec("wmrl/LIBERO-Long-v0").kwargs == {"suite": "libero_10"}
    obs, info = libero.reset(seed=0, options={"init_state_id": 4})
    assert info["instruction"] == "put both the alphabet soup and the tomato sauce in the basket"
    assert info["init_state_id"] == 4 and info["success"] is False
    assert libero.observation_space.contains(obs)
    assert libero.call("init_states").shape[0] == 50, "LIBERO ships 50 init states per task"


def test_init_states_fix_the_start(libero) -> None:
    first, _ = libero.reset(seed=0, options={"init_state_id": 7})
    trajectory = rollout(libero, _actions(0, 4))
    again, _ = libero.reset(seed=123, options={"init_state_id": 7})
    np.testing.assert_array_equal(first, again)
    assert_bitwise_equal(trajectory, rollout(libero, _actions(0, 4)))
    other, _ = libero.reset(options={"init_state_id": 8})
    assert not np.array_equal(first, other)
    with pytest.raises(ValueError, match="init_state_id must be in"):
        libero.reset(options={"init_state_id": 50})
    with pytest.raises(ValueError, match="unknown reset options"):
        libero.reset(options={"task": 3})


def test_group_members_restored_from_one_snapshot_replay_bit_identically(libero) -> None:
    partner = _make()
    try:
        libero.reset(options={"init_state_id": 1})
        rollout(libero, _actions(1, 5))
        snapshot = libero.get_snapshot()
        actions = _actions(2, 8)
        original = rollout(libero, actions)
        partner.reset(options={"init_state_id": 2})
        rollout(partner, _actions(3, 3))
        partner.restore_snapshot(snapshot)
        libero.restore_snapshot(snapshot)
        replay_partner, replay_self = rollout(partner, actions), rollout(libero, actions)
        assert_bitwise_equal(replay_partner, replay_self)
        assert_bitwise_equal(original, replay_self)
    finally:
        partner.close()
    with pytest.raises(ValueError, match="libero_10/0"):
        libero.restore_snapshot({**snapshot, "task": "libero_10/3"})


class TestLiberoSnapshots(SnapshotContract):
    """The shared snapshot contract on LIBERO-Long task 0, through its worker."""

    def make_env(self) -> gym.Env:
        return _make()


def test_goal_predicates_give_the_binary_success_reward() -> None:
    from wmrl_env.envs.libero import find_libero_python
    from wmrl_env.envs.remote import SubprocessEnv

    env = SubprocessEnv(
        "libero_goal:GoalPlacingLiberoEnv",
        kwargs={"suite": "libero_10", "task_id": 0, "horizon": 30},
        python=find_libero_python(),
        env_vars={"PYTHONPATH": WORKER_ENVS},
    )
    try:
        env.reset(options={"init_state_id": 0})
        _, reward, terminated, truncated, info = env.step(NOOP)
        assert (reward, terminated, info["success"]) == (0.0, False, False)
        env.call("place_goal_objects_in_basket")
        _, reward, terminated, truncated, info = env.step(NOOP)
        assert (reward, terminated, truncated, info["success"]) == (1.0, True, False, True)
        with pytest.raises(RuntimeError, match="reset"):
            env.step(NOOP)
    finally:
        env.close()


def test_truncates_at_the_horizon_without_reward(libero) -> None:
    libero.reset(options={"init_state_id": 0})
    steps = [libero.step(NOOP) for _ in range(30)]
    assert [s[1] for s in steps] == [0.0] * 30
    assert [s[3] for s in steps] == [False] * 29 + [True]


def test_camera_mode_gives_128px_images_and_the_same_state(libero) -> None:
    camera = _make(observation_mode="camera", camera_size=128)
    try:
        assert set(camera.observation_space.spaces) == {
            "state",
            "agentview_image",
            "robot0_eye_in_hand_image",
        }
        obs, _ = camera.reset(options={"init_state_id": 5})
        state_only, _ = libero.reset(options={"init_state_id": 5})
        np.testing.assert_array_equal(obs["state"], state_only)
        for key in ("agentview_image", "robot0_eye_in_hand_image"):
            image = obs[key]
            assert image.shape == (128, 128, 3) and image.dtype == np.uint8
            assert image.std() > 10, f"{key} is blank: rendering failed"
        next_obs = camera.step(NOOP)[0]
        assert camera.observation_space.contains(next_obs)
    finally:
        camera.close()


def test_bad_arguments_fail_in_the_worker_with_a_clear_error() -> None:
    with pytest.raises(ValueError, match="observation_mode"):
        _make(observation_mode="pixels")
    with pytest.raises(ValueError, match="task_id must be in"):
        _make(task_id=10)
