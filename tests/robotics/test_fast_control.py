"""FastControl plays robosuite's controller sub-steps bit for bit, with real MuJoCo."""

from __future__ import annotations

import numpy as np
import pytest
from fast_control_helpers import actions, assert_same, physics, robot_state

pytestmark = pytest.mark.robosuite

HORIZON = 80


def _pair(task: str):
    from wmrl_env.envs.robosuite import RobosuiteEnv

    own = RobosuiteEnv(task, horizon=HORIZON, fast_control=False)
    fast = RobosuiteEnv(task, horizon=HORIZON, fast_control=True)
    assert (own.fast_control, fast.fast_control) == (False, True)
    return own, fast


def _assert_same_play(own, fast, seed: int, commands: np.ndarray) -> int:
    """Both envs from ``reset(seed)`` through ``commands``: every output and the whole MuJoCo
    state equal at every step; returns the steps played."""
    first, second = own.reset(seed=seed), fast.reset(seed=seed)
    assert np.array_equal(first[0], second[0]) and first[1] == second[1]
    for step, action in enumerate(commands):
        a, b = own.step(action), fast.step(action)
        assert np.array_equal(a[0], b[0]), f"step {step}: observations differ"
        assert a[1:] == b[1:], f"step {step}: {a[1:]} != {b[1:]}"
        assert_same(physics(own.sim_env), physics(fast.sim_env), f"step {step}: MuJoCo state")
        assert_same(robot_state(own.sim_env), robot_state(fast.sim_env), f"step {step}: robot")
        if a[2] or a[3]:
            return step + 1
    return len(commands)


@pytest.mark.slow
@pytest.mark.parametrize("task", ["Lift", "Stack", "Door"])
def test_trajectories_are_bit_identical_to_robosuites_own_control(task: str) -> None:
    own, fast = _pair(task)
    try:
        played = sum(
            _assert_same_play(own, fast, seed, actions(seed, HORIZON)) for seed in (0, 1, 2)
        )
        assert played == 3 * HORIZON  # random commands never solve the task: whole episodes
        # the controllers' state too (what a snapshot holds: goals, gains, cached kinematics)
        assert_same(own.get_snapshot(), fast.get_snapshot())
    finally:
        own.close(), fast.close()


def test_restored_snapshots_continue_identically() -> None:
    own, fast = _pair("Lift")
    try:
        own.reset(seed=4)
        for action in actions(4, 10):
            own.step(action)
        middle = own.get_snapshot()
        fast.reset(seed=4)
        for env in (own, fast):
            env.restore_snapshot(middle)
        later = actions(5, 30)
        a = [own.step(action)[:4] for action in later]
        b = [fast.step(action)[:4] for action in later]
        assert all(np.array_equal(x[0], y[0]) and x[1:] == y[1:] for x, y in zip(a, b, strict=True))
        assert_same(physics(own.sim_env), physics(fast.sim_env), "MuJoCo state")
    finally:
        own.close(), fast.close()


def test_default_uses_it_where_covered_and_says_why_not_elsewhere() -> None:
    from wmrl_env.envs.robosuite import RobosuiteEnv
    from wmrl_env.envs.robosuite.fast_control import FastControl, unsupported_reason

    env = RobosuiteEnv("Lift", horizon=5)
    try:
        assert env.fast_control and unsupported_reason(env.sim_env) is None
    finally:
        env.close()
    full_physics = RobosuiteEnv("Lift", horizon=5, lite_physics=False)
    try:
        assert not full_physics.fast_control
        assert unsupported_reason(full_physics.sim_env) == "lite_physics is off"
        with pytest.raises(ValueError, match="lite_physics is off"):
            FastControl(full_physics.sim_env)
    finally:
        full_physics.close()
    with pytest.raises(ValueError, match=r"fast_control=True.*lite_physics is off"):
        RobosuiteEnv("Lift", horizon=5, lite_physics=False, fast_control=True)
    with pytest.raises(ValueError, match="fast_control must be"):
        RobosuiteEnv("Lift", horizon=5, fast_control="yes")


def test_a_hard_reset_rebuilds_what_the_fast_step_holds() -> None:
    """robosuite's ``hard_reset=True`` makes a new simulation, controllers and observables at
    every reset: the fast step must follow them there, bit for bit."""
    import robosuite

    from wmrl_env.envs.robosuite.fast_control import FastControl

    def make():
        return robosuite.make(
            "Lift", robots="Panda", has_renderer=False, has_offscreen_renderer=False,
            use_camera_obs=False, hard_reset=True, horizon=30, seed=3,
        )  # fmt: skip

    own, fast = make(), make()
    FastControl(fast).install()
    try:
        for episode in range(2):
            first, second = own.reset(), fast.reset()
            assert all(np.array_equal(first[key], second[key]) for key in first)
            for step, action in enumerate(actions(episode, 12).astype(np.float64)):
                a, b = own.step(action), fast.step(action)
                assert all(np.array_equal(a[0][key], b[0][key]) for key in a[0]), (episode, step)
                assert a[1:3] == b[1:3]
                assert np.array_equal(own.sim.data.qvel, fast.sim.data.qvel), (episode, step)
    finally:
        own.close(), fast.close()
