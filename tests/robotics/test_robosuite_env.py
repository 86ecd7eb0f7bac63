"""robosuite 1.5 tasks behind the gymnasium API, with real MuJoCo."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from robotics_helpers import assert_bitwise_equal, rollout

from wmrl_env.testing import SnapshotContract

pytestmark = pytest.mark.robosuite


@pytest.fixture(scope="module")
def lift():
    from wmrl_env.envs.robosuite import RobosuiteEnv

    env = RobosuiteEnv("Lift", horizon=40)
    yield env
    env.close()


@pytest.fixture(scope="module")
def other_lift():
    from wmrl_env.envs.robosuite import RobosuiteEnv

    env = RobosuiteEnv("Lift", horizon=40)
    yield env
    env.close()


def _actions(seed: int, n: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, (n, 7)).astype(np.float32)


@pytest.mark.slow
@pytest.mark.parametrize("env_id", ["wmrl/Lift-v0", "wmrl/Stack-v0", "wmrl/Door-v0"])
def test_registered_tasks_pass_check_env(env_id: str) -> None:
    import wmrl_env.envs.robosuite  # noqa: F401  (registers the ids)

    env = gym.make(env_id, horizon=20)
    try:
        check_env(env.unwrapped, skip_render_check=True)
        obs, info = env.reset(seed=0)
        assert env.observation_space.contains(obs)
        assert env.action_space.shape == (7,) and info["success"] is False
    finally:
        env.close()


def test_seeded_reset_reproduces_after_any_history(lift) -> None:
    first, _ = lift.reset(seed=11)
    trajectory = rollout(lift, _actions(0, 5))
    rollout(lift, _actions(1, 7))
    again, _ = lift.reset(seed=11)
    np.testing.assert_array_equal(first, again)
    assert_bitwise_equal(trajectory, rollout(lift, _actions(0, 5)))
    different, _ = lift.reset(seed=12)
    assert not np.array_equal(first, different), "another seed must place the cube elsewhere"


def test_restored_snapshots_replay_bit_identically(lift, other_lift) -> None:
    """Two envs with different histories, restored to one snapshot, replay the same actions
    bit for bit, and both equal the original continuation."""
    lift.reset(seed=1)
    rollout(lift, _actions(2, 10))
    snapshot = lift.get_snapshot()
    obs_at_snapshot = lift.step(np.zeros(7, np.float32))[0]
    lift.restore_snapshot(snapshot)
    actions = _actions(3, 15)
    original = rollout(lift, actions)

    other_lift.reset(seed=2)
    rollout(other_lift, _actions(4, 17))
    first_obs, info = other_lift.restore_snapshot(snapshot)
    replay_one = rollout(other_lift, actions)
    lift.restore_snapshot(snapshot)
    replay_two = rollout(lift, actions)

    assert_bitwise_equal(replay_one, replay_two)
    assert_bitwise_equal(original, replay_one)
    assert info["timestep"] == 10
    assert not np.array_equal(first_obs, obs_at_snapshot), "restore must not keep later state"


@pytest.mark.slow
def test_snapshot_is_plain_data_and_crosses_processes(lift) -> None:
    """A snapshot taken here and restored in a worker process replays the same trajectory."""
    from wmrl_env.envs.remote import SubprocessEnv
    from wmrl_env.envs.remote.protocol import decode, encode

    lift.reset(seed=5)
    rollout(lift, _actions(5, 4))
    snapshot = lift.get_snapshot()
    assert decode(encode(snapshot)).keys() == snapshot.keys()
    actions = _actions(6, 6)
    lift.restore_snapshot(snapshot)
    here = rollout(lift, actions)
    remote = SubprocessEnv(
        "wmrl_env.envs.robosuite.env:RobosuiteEnv", kwargs={"task": "Lift", "horizon": 40}
    )
    try:
        remote.restore_snapshot(snapshot)
        assert_bitwise_equal(here, rollout(remote, actions))
    finally:
        remote.close()


def test_bad_snapshots_are_rejected_and_leave_the_env_usable(lift) -> None:
    from wmrl_env.envs.robosuite import RobosuiteEnv

    lift.reset(seed=0)
    snapshot = lift.get_snapshot()
    with pytest.raises(ValueError, match="not a robosuite snapshot"):
        lift.restore_snapshot({"physics": snapshot["physics"]})
    with pytest.raises(ValueError, match="physics state has shape"):
        lift.restore_snapshot({**snapshot, "physics": snapshot["physics"][:-1]})
    with pytest.raises(ValueError, match="task 'Stack'"):
        lift.restore_snapshot({**snapshot, "task": "Stack"})
    other_model = RobosuiteEnv("Lift", horizon=40, model_seed=1)
    try:
        with pytest.raises(ValueError, match="different model"):
            other_model.restore_snapshot(snapshot)
    finally:
        other_model.close()
    assert lift.step(np.zeros(7, np.float32))[0].shape == lift.observation_space.shape


class TestLiftSnapshots(SnapshotContract):
    """The shared snapshot contract on the registered Lift task (real MuJoCo)."""

    def make_env(self) -> gym.Env:
        import wmrl_env.envs.robosuite  # noqa: F401  (registers the ids)

        return gym.make("wmrl/Lift-v0", horizon=40)


class TestDoorSnapshots(SnapshotContract):
    """Door places the door by writing the model at reset: a snapshot restores into an env
    whose last reset drew the same placement (same seed), as a group's members are reset."""

    restore_after_same_reset = True

    def make_env(self) -> gym.Env:
        import wmrl_env.envs.robosuite  # noqa: F401  (registers the ids)

        return gym.make("wmrl/Door-v0", horizon=40)

    def test_restore_after_another_seed_is_refused_clearly(self, envs, start) -> None:
        snapshot = start[0]
        other = envs[1].unwrapped
        other.reset(seed=self.other_seed)
        with pytest.raises(ValueError, match="different model"):
            other.restore_snapshot(snapshot)


def test_truncates_at_the_horizon_and_refuses_to_step_past_it() -> None:
    from wmrl_env.envs.robosuite import RobosuiteEnv

    env = RobosuiteEnv("Lift", horizon=3)
    try:
        env.reset(seed=0)
        flags = [step[2:4] for step in rollout(env, _actions(0, 3))]
        assert flags == [(False, False), (False, False), (False, True)]
        with pytest.raises(RuntimeError, match="reset"):
            env.step(np.zeros(7, np.float32))
    finally:
        env.close()


def test_success_is_reported_and_can_end_the_episode() -> None:
    """Lift succeeds when the cube is above the table: put it there through the simulator."""
    from wmrl_env.envs.robosuite import RobosuiteEnv

    env = RobosuiteEnv("Lift", horizon=20, terminate_on_success=True, reward_shaping=False)
    try:
        env.reset(seed=0)
        sim = env.sim_env.sim
        start = sim.model.get_joint_qpos_addr(env.sim_env.cube.joints[0])[0]
        sim.data.qpos[start + 2] += 0.3
        sim.forward()
        _, reward, terminated, truncated, info = env.step(np.zeros(7, np.float32))
        assert info["success"] and terminated and not truncated
        assert reward == pytest.approx(1.0)
    finally:
        env.close()


def test_invalid_arguments_and_actions(lift) -> None:
    from wmrl_env.envs.robosuite import RobosuiteEnv

    with pytest.raises(ValueError, match="horizon"):
        RobosuiteEnv("Lift", horizon=0)
    with pytest.raises(ValueError, match="render_mode"):
        RobosuiteEnv("Lift", render_mode="human")
    lift.reset(seed=0)
    with pytest.raises(ValueError, match="shape"):
        lift.step(np.zeros(3))
    with pytest.raises(ValueError, match="NaN"):
        lift.step(np.full(7, np.nan))


@pytest.mark.slow
def test_renders_upright_frames_headless() -> None:
    """Offscreen rendering through EGL, in a worker so MUJOCO_GL is set before MuJoCo loads."""
    from wmrl_env.envs.remote import SubprocessEnv

    env = SubprocessEnv(
        "wmrl_env.envs.robosuite.env:RobosuiteEnv",
        kwargs={"task": "Lift", "horizon": 5, "render_mode": "rgb_array", "render_size": (64, 48)},
        env_vars={"MUJOCO_GL": "egl"},
    )
    try:
        env.reset(seed=0)
        frame = env.render()
        assert frame.shape == (64, 48, 3) and frame.dtype == np.uint8
        assert frame.std() > 5, "a blank frame: rendering failed"
        # the sky/background is at the top of an upright frontview image, the table below
        assert frame[:8].mean() != pytest.approx(frame[-8:].mean(), abs=1.0)
    finally:
        env.close()
