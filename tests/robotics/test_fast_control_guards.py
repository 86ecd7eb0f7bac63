"""FastControl turns on only where it is robosuite's own floats: other arms and grippers
bit-identical, copies independent, and what it cannot reproduce refused with the reason."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from fast_control_helpers import actions, assert_same, assert_same_raw_play, make_raw, physics

pytestmark = pytest.mark.robosuite


def _fast_pair(task: str, robots, gripper="default", **kwargs):
    """robosuite's own env and one with the fast step installed (which must cover it)."""
    from wmrl_env.envs.robosuite.fast_control import FastControl, unsupported_reason

    own, fast = make_raw(task, robots, gripper, **kwargs), make_raw(task, robots, gripper, **kwargs)
    assert unsupported_reason(fast) is None
    FastControl(fast).install()
    return own, fast


@pytest.mark.parametrize(
    ("task", "robots", "gripper"),
    [
        ("Wipe", "Panda", "default"),  # a gripper without actuators
        ("Lift", "UR5e", "default"),  # Robotiq 85: 6 joints, 1 actuator
        ("Lift", "Kinova3", "default"),
        ("Lift", "Jaco", "default"),  # three fingers
        ("Lift", "Panda", "Robotiq85Gripper"),
        ("Lift", "Panda", "Robotiq140Gripper"),
        ("Lift", "Panda", "RobotiqThreeFingerGripper"),  # 11 joints, 4 actuators
    ],
)
def test_other_arms_grippers_and_wipe_are_bit_identical(task, robots, gripper) -> None:
    own, fast = _fast_pair(task, robots, gripper, horizon=25)
    try:
        for seed in (0, 1):  # a second episode: the reset after a played one
            played = assert_same_raw_play(own, fast, actions(seed, 25, own.action_dim))
            assert played >= 10  # Wipe ends an episode early where the arm hits its limits
    finally:
        own.close(), fast.close()


def test_the_highest_control_frequency_is_bit_identical_and_higher_ones_are_refused() -> None:
    from wmrl_env.envs.robosuite import RobosuiteEnv
    from wmrl_env.envs.robosuite.fast_control import unsupported_reason

    own, fast = _fast_pair("Lift", "Panda", control_freq=500)  # one physics sub-step a step
    try:
        assert assert_same_raw_play(own, fast, actions(0, 30)) == 30
    finally:
        own.close(), fast.close()
    for frequency in (501, 1000):  # robosuite plays no physics sub-step at all here
        env = RobosuiteEnv("Lift", horizon=5, control_freq=frequency)
        try:
            assert not env.fast_control
            assert "robosuite plays no sub-step" in unsupported_reason(env.sim_env)
        finally:
            env.close()
    with pytest.raises(ValueError, match="above the physics rate"):
        RobosuiteEnv("Lift", horizon=5, control_freq=1000, fast_control=True)


def test_a_deep_copy_steps_itself_and_leaves_the_original_alone() -> None:
    """A copy's fast step plays the copy's simulation (not the original's, whose raw MuJoCo
    addresses the kernel held), bit-identical to a copy of robosuite's own path."""
    from wmrl_env.envs.robosuite import RobosuiteEnv

    own = RobosuiteEnv("Lift", horizon=60, fast_control=False)
    fast = RobosuiteEnv("Lift", horizon=60, fast_control=True)
    try:
        commands = actions(3, 40)
        for env in (own, fast):
            env.reset(seed=3)
            for command in commands[:10]:
                env.step(command)
        own_copy, fast_copy = copy.deepcopy(own), copy.deepcopy(fast)
        assert fast_copy.fast_control
        before = physics(fast.sim_env)
        for command in commands[10:25]:
            a, b = own_copy.step(command), fast_copy.step(command)
            assert_same(a, b, "copies")
        assert_same(physics(fast.sim_env), before, "the original after its copy stepped")
        assert_same(physics(own_copy.sim_env), physics(fast_copy.sim_env), "copies")
        for command in commands[10:25]:  # the originals go on from where they were
            assert_same(own.step(command), fast.step(command), "originals")
        assert_same(physics(own.sim_env), physics(fast_copy.sim_env), "the same course")
        for command in commands[25:]:  # and the copy again, after the original moved
            assert_same(own_copy.step(command), fast_copy.step(command), "copies later")
        assert_same(physics(own_copy.sim_env), physics(fast_copy.sim_env), "copies later")
    finally:
        own.close(), fast.close()


def test_the_installed_robosuite_is_the_code_the_fast_step_was_proven_against() -> None:
    from wmrl_env.envs.robosuite.proven_code import PROVEN, fingerprint, mismatch

    assert mismatch() is None
    assert fingerprint() == PROVEN
    assert "missing" not in PROVEN.values() and "no source" not in PROVEN.values()


def test_a_patched_controller_turns_the_fast_step_off_with_the_reason(monkeypatch) -> None:
    """A changed OSC (here: its torques scaled) would be silently different under the fast
    step; the fingerprint sees other source and refuses."""
    from robosuite.controllers.parts.arm.osc import OperationalSpaceController

    from wmrl_env.envs.robosuite import RobosuiteEnv

    original = OperationalSpaceController.run_controller

    def run_controller(self):  # a patched robosuite: other torques
        return original(self) * 1.01

    monkeypatch.setattr(OperationalSpaceController, "run_controller", run_controller)
    env = RobosuiteEnv("Lift", horizon=5)
    try:
        assert not env.fast_control
    finally:
        env.close()
    with pytest.raises(ValueError, match=r"OperationalSpaceController\.run_controller differ"):
        RobosuiteEnv("Lift", horizon=5, fast_control=True)


def test_another_robosuites_fingerprint_refuses(monkeypatch) -> None:
    from wmrl_env.envs.robosuite import proven_code
    from wmrl_env.envs.robosuite.fast_control import unsupported_reason

    env = make_raw("Lift")
    try:
        assert unsupported_reason(env) is None
        proven = {**proven_code.PROVEN, "FixedBaseRobot.control": "0" * 16}
        monkeypatch.setattr(proven_code, "PROVEN", proven)
        reason = unsupported_reason(env)
        assert reason is not None and "FixedBaseRobot.control differ" in reason
        assert "robosuite 1.5.2" in reason
    finally:
        env.close()


@pytest.fixture
def fresh_blas_check():
    """The self-test's cache emptied before and after (it runs once per shape and process)."""
    from wmrl_env.envs.robosuite.blas_check import blas_disagreement

    blas_disagreement.cache_clear()
    yield blas_disagreement
    blas_disagreement.cache_clear()


def test_the_blas_self_test_passes_here_and_runs_once_per_shape(fresh_blas_check, monkeypatch):
    from wmrl_env.envs.robosuite import substep_kernel

    calls = []
    products = substep_kernel.kernel_products

    def counted(*arguments):
        calls.append(1)
        return products(*arguments)

    monkeypatch.setattr(substep_kernel, "kernel_products", counted)
    assert fresh_blas_check(9, 7) is None  # Lift's Panda: nv 9, 7 arm joints
    assert fresh_blas_check(9, 7) is None
    assert len(calls) == 64  # the trials of the first call only
    assert fresh_blas_check(15, 6) is None  # UR5e with a Robotiq 85


def test_a_failing_blas_self_test_falls_back_to_robosuites_path(fresh_blas_check, monkeypatch):
    """A kernel product one float off numpy's (another BLAS kernel) keeps robosuite's path."""
    from wmrl_env.envs.robosuite import RobosuiteEnv, substep_kernel
    from wmrl_env.envs.robosuite.fast_control import unsupported_reason

    products = substep_kernel.kernel_products

    def one_ulp_off(*arguments):
        velocity, force, torques = products(*arguments)
        torques = torques.copy()
        torques[-1] = np.nextafter(torques[-1], np.inf)
        return velocity, force, torques

    monkeypatch.setattr(substep_kernel, "kernel_products", one_ulp_off)
    env = RobosuiteEnv("Lift", horizon=5)
    try:
        assert not env.fast_control
        reason = unsupported_reason(env.sim_env)
        assert reason is not None and "different floats" in reason and "arm's torques" in reason
    finally:
        env.close()
