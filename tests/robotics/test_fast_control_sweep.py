"""robosuite 1.5.2's set-ups (tasks x robots x grippers x controllers x control frequencies)
under FastControl: each is either bit-identical with the fast step on, or refused with a reason
(and robosuite's own path kept); none crashes or differs.

The whole sweep (126 set-ups) takes 14-22 minutes on 2 cores: it runs with
``WMRL_FULL_SWEEP=1``. Without it, a set-up of each kind runs (:data:`EVERY_RUN`) and the rest
are skipped with that reason.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from fast_control_helpers import actions, assert_same_raw_play, make_raw

pytestmark = [pytest.mark.robosuite, pytest.mark.slow]

FULL_SWEEP = os.environ.get("WMRL_FULL_SWEEP") == "1"
# the set-ups every test run covers: one of each kind, on and refused alike
EVERY_RUN = {
    "task-Lift-Panda-default-{}",
    "task-Wipe-Panda-default-{}",
    "task-PickPlace-Panda-default-{}",
    "two arms-TwoArmLift-['Panda', 'Panda']-default-{}",
    "robot-Lift-UR5e-default-{}",
    "gripper-Lift-Panda-Robotiq85Gripper-{}",
    "arm x task-Door-Kinova3-default-{}",
    "controller-Lift-Panda-default-{'arm': 'OSC_POSITION'}",
    "controller-Lift-Panda-default-{'arm': 'JOINT_POSITION'}",
    "control_freq-Lift-Panda-default-{'control_freq': 7}",
    "physics-Lift-Panda-default-{'lite_physics': False}",
}

SINGLE_ARM_TASKS = (
    "Lift", "Stack", "NutAssembly", "NutAssemblySingle", "NutAssemblySquare",
    "NutAssemblyRound", "PickPlace", "PickPlaceSingle", "PickPlaceMilk", "PickPlaceBread",
    "PickPlaceCereal", "PickPlaceCan", "Door", "Wipe", "ToolHang",
)  # fmt: skip
# every robot robosuite 1.5.2 builds without robosuite_models or mink
ROBOTS = (
    "Sawyer", "Baxter", "Panda", "Jaco", "Kinova3", "IIWA", "UR5e", "Tiago", "GR1",
    "GR1FloatingBody", "GR1ArmsOnly", "XArm7", "PandaOmron", "SpotWithArm",
    "SpotWithArmFloating", "PandaDexRH", "PandaDexLH",
)  # fmt: skip
GRIPPERS = (
    "RethinkGripper", "PandaGripper", "JacoThreeFingerGripper",
    "JacoThreeFingerDexterousGripper", "WipingGripper", "Robotiq85Gripper", "Robotiq140Gripper",
    "RobotiqThreeFingerGripper", "RobotiqThreeFingerDexterousGripper", "BDGripper",
    "InspireLeftHand", "InspireRightHand", "FourierLeftHand", "FourierRightHand",
    "XArm7Gripper", None,
)  # fmt: skip
OTHER_ARMS = ("Sawyer", "UR5e", "Kinova3", "Jaco", "PandaDexRH")
# the Panda's arm controller changed: another part controller, or OSC options (not
# JOINT_VELOCITY or OSC position limits: robosuite 1.5.2's own path fails on them)
ARM_CONTROLLERS = {
    "OSC_POSITION": {"type": "OSC_POSITION"},
    "JOINT_POSITION": {"type": "JOINT_POSITION"},
    "JOINT_TORQUE": {"type": "JOINT_TORQUE"},
    "IK_POSE": {"type": "IK_POSE"},
    "variable impedance": {"impedance_mode": "variable"},
    "variable kp": {"impedance_mode": "variable_kp"},
    "world frame": {"input_ref_frame": "world"},
    "interpolator": {"interpolation": "linear"},
    "coupled": {"uncouple_pos_ori": False},
    "stiff, underdamped": {"kp": 300, "damping_ratio": 0.5},
    "absolute input": {"input_type": "absolute"},
}


def _cases() -> list[Any]:
    cases = [("task", task, "Panda", "default", {}) for task in SINGLE_ARM_TASKS]
    cases += [
        ("two arms", task, ["Panda", "Panda"], None if task == "TwoArmPegInHole" else "default", {})
        for task in ("TwoArmLift", "TwoArmPegInHole", "TwoArmHandover", "TwoArmTransport")
    ]
    cases.append(("bimanual", "TwoArmLift", "Baxter", "default",
                  {"env_configuration": "single-robot"}))  # fmt: skip
    cases += [("robot", "Lift", robot, "default", {}) for robot in ROBOTS]
    cases += [("gripper", "Lift", "Panda", gripper, {}) for gripper in GRIPPERS]
    cases += [
        ("arm x task", task, robot, "default", {})
        for robot in OTHER_ARMS
        for task in ("Stack", "NutAssemblySquare", "PickPlaceCan", "Door", "Wipe", "ToolHang")
    ]
    cases += [
        ("arm x gripper", "Lift", robot, gripper, {})
        for robot in ("UR5e", "Sawyer", "Kinova3")
        for gripper in ("PandaGripper", "RethinkGripper", "Robotiq85Gripper",
                        "RobotiqThreeFingerGripper", "JacoThreeFingerGripper", "InspireRightHand",
                        "XArm7Gripper", "WipingGripper")
    ]  # fmt: skip
    cases += [("controller", "Lift", "Panda", "default", {"arm": name}) for name in ARM_CONTROLLERS]
    cases += [
        ("control_freq", "Lift", "Panda", "default", {"control_freq": frequency})
        for frequency in (7, 33, 499, 500, 501, 1000)
    ]
    cases += [
        ("physics", "Lift", "Panda", "default", {"lite_physics": False}),
        ("reset", "Lift", "Panda", "default", {"hard_reset": False}),
    ]
    params = []
    for kind, *case in cases:
        name = f"{kind}-{'-'.join(map(str, case))}"
        skip = pytest.mark.skipif(
            not FULL_SWEEP and name not in EVERY_RUN,
            reason="the full set-up sweep takes 14-22 min: set WMRL_FULL_SWEEP=1",
        )
        params.append(pytest.param(*case, id=name, marks=skip))
    return params


def _arm_controller(change: dict[str, Any]) -> dict[str, Any]:
    """The Panda's default composite controller with its arm's part controller changed."""
    from robosuite.controllers import load_composite_controller_config, load_part_controller_config

    config = load_composite_controller_config(robot="Panda")
    arm = config["body_parts"]["right"]
    if "type" in change:
        arm = {**load_part_controller_config(default_controller=change["type"]),
               "gripper": arm["gripper"]}  # fmt: skip
    config["body_parts"]["right"] = {**arm, **change}
    return config


@pytest.mark.parametrize(("task", "robots", "gripper", "options"), _cases())
def test_every_set_up_is_bit_identical_or_refused(task, robots, gripper, options, record_property):
    from wmrl_env.envs.robosuite.fast_control import FastControl, unsupported_reason

    options = dict(options)
    if "arm" in options:
        options["controller_configs"] = _arm_controller(ARM_CONTROLLERS[options.pop("arm")])
    own = make_raw(task, robots, gripper, horizon=20, **options)
    fast = make_raw(task, robots, gripper, horizon=20, **options)
    try:
        reason = unsupported_reason(fast)
        record_property("fast_control", "on" if reason is None else f"refused: {reason}")
        if reason is not None:
            assert isinstance(reason, str) and reason
            with pytest.raises(ValueError, match="FastControl does not cover this env"):
                FastControl(fast)
            return
        FastControl(fast).install()
        assert_same_raw_play(own, fast, actions(0, 20, own.action_dim))  # Wipe may end early
        assert_same_raw_play(own, fast, actions(1, 6, own.action_dim))  # after a reset
    finally:
        own.close(), fast.close()
