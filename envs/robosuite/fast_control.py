"""robosuite's OSC arm and gripper control, bit for bit, with less Python per sub-step.

robosuite recomputes its controllers at each of the physics sub-steps of a control step (25 at
``control_freq=20``), and most of a step's time is the Python around the arithmetic: name
look-ups, the action space rebuilt three times, Jacobians queried four times, the gripper's
command rebuilt. :class:`FastControl` leaves the control step's first sub-step (where the new
action sets the goals) to robosuite and plays the other sub-steps itself: the same MuJoCo
queries and the same arithmetic (robosuite's own compiled ``opspace_matrices``,
``nullspace_torques`` and ``orientation_error``), in the same order, on arrays of the same
layout, so every float is the same; what is constant over a control step (the goal in the
world frame, the gains, the gripper command, the actuator ranges) is worked out once. The
controllers' attributes (pose, Jacobians, mass matrix, torques) are left as robosuite leaves
them, so a snapshot or robosuite's next policy step sees the same state.

It covers one fixed-base robot with robosuite's basic composite controller, an OSC arm
(``OSC_POSE``, the default and the one tested; ``OSC_POSITION`` runs the same sub-step) of
fixed impedance in the base frame without interpolation, and a ``GRIP`` gripper, with lite
physics: the default Panda of every single-arm task. :func:`unsupported_reason` says why
another set-up is not covered (it then keeps robosuite's own path).

Example (needs robosuite)::

    env = robosuite.make(
        "Lift", has_renderer=False, has_offscreen_renderer=False, use_camera_obs=False
    )
    if unsupported_reason(env) is None:
        FastControl(env).install()      # env.step now runs the fast sub-steps
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["FastControl", "unsupported_reason"]


def unsupported_reason(env: Any) -> str | None:
    """Why :class:`FastControl` cannot play ``env``'s sub-steps, or ``None`` if it can."""
    from robosuite.controllers.composite.composite_controller import CompositeController
    from robosuite.controllers.parts.arm.osc import OperationalSpaceController
    from robosuite.controllers.parts.gripper.simple_grip import SimpleGripController
    from robosuite.environments.robot_env import RobotEnv
    from robosuite.robots.fixed_base_robot import FixedBaseRobot

    if type(env)._pre_action is not RobotEnv._pre_action:
        return f"{type(env).__name__} overrides robosuite's _pre_action"
    if not env.lite_physics:
        return "lite_physics is off"
    if len(env.robots) != 1:
        return f"{len(env.robots)} robots (one is covered)"
    robot = env.robots[0]
    if type(robot).control is not FixedBaseRobot.control:
        return f"robot {type(robot).__name__} is not a fixed-base robot"
    if type(robot.composite_controller) is not CompositeController:
        return f"composite controller {type(robot.composite_controller).__name__} is not BASIC"
    if len(robot.arms) != 1:
        return f"{len(robot.arms)} arms (one is covered)"
    parts = robot.composite_controller.part_controllers
    arm = parts.get(robot.arms[0])
    if type(arm) is not OperationalSpaceController:
        return f"arm controller {type(arm).__name__} is not OSC"
    if arm.impedance_mode != "fixed" or arm.input_ref_frame != "base":
        return f"OSC with {arm.impedance_mode} impedance in the {arm.input_ref_frame} frame"
    if arm.interpolator_pos is not None or arm.interpolator_ori is not None:
        return "OSC with an interpolator"
    if not arm.uncoupling or not arm.lite_physics or arm.num_ref_sites != 1:
        return "OSC with coupled position and orientation, full physics or several sites"
    grippers = [part for name, part in parts.items() if name != robot.arms[0]]
    if len(grippers) != 1 or type(grippers[0]) is not SimpleGripController:
        return "the arm's gripper is not one GRIP controller"
    if grippers[0].interpolator is not None:
        return "gripper with an interpolator"
    if not all(robot._enabled_parts.get(name, False) for name in parts):
        return "some controller parts are disabled"
    model = env.sim.model
    base_site = model.site_name2id(f"{arm.naming_prefix}{arm.part_name}_center")
    if model.body_weldid[model.site_bodyid[base_site]] != 0:
        return "the arm's base is not welded to the world"
    return None


class FastControl:
    """Plays ``env``'s controller sub-steps as robosuite does (see the module docstring);
    :meth:`install` makes ``env.step`` use it. Raises ``ValueError`` for an env it does not
    cover, with :func:`unsupported_reason`'s reason."""

    def __init__(self, env: Any) -> None:
        reason = unsupported_reason(env)
        if reason is not None:
            raise ValueError(f"FastControl does not cover this env: {reason}")
        self.env = env
        self._robosuite_pre_action = env._pre_action
        self._step: _ControlStep | None = None

    def install(self) -> None:
        """Route ``env.step``'s sub-steps through :meth:`pre_action`."""
        self.env._pre_action = self.pre_action

    def pre_action(self, action: np.ndarray, policy_step: bool = False) -> None:
        """robosuite's ``_pre_action``: the policy step its own way, the rest fast."""
        if policy_step or self._step is None:
            self._robosuite_pre_action(action, policy_step)
            self._step = _ControlStep(self.env)
        else:
            self._step.substep()


class _ControlStep:
    """One control step's sub-steps after the first: robosuite's ``FixedBaseRobot.control``
    with ``policy_step=False`` (``OperationalSpaceController.run_controller`` and
    ``SimpleGripController.run_controller``, their ``update``), operation for operation."""

    def __init__(self, env: Any) -> None:
        import mujoco
        from robosuite.utils.control_utils import (
            nullspace_torques,
            opspace_matrices,
            orientation_error,
        )

        self._mujoco = mujoco
        self._opspace_matrices, self._nullspace_torques = opspace_matrices, nullspace_torques
        self._orientation_error = orientation_error
        robot = env.robots[0]
        sim = env.sim
        self._model, self._data = sim.model._model, sim.data._data
        self._qpos, self._qvel, self._ctrl = sim.data.qpos, sim.data.qvel, sim.data.ctrl
        self._qfrc_bias = sim.data.qfrc_bias
        parts = robot.composite_controller.part_controllers
        name = robot.arms[0]
        self.arm = arm = parts[name]
        self.gripper = next(part for key, part in parts.items() if key != name)
        self._ref_site = sim.model.site_name2id(arm.ref_name)
        # robosuite's index lists as arrays (numpy converts a list at every indexing)
        self._arm_qpos, self._arm_qvel = np.asarray(arm.qpos_index), np.asarray(arm.qvel_index)
        self._gripper_qpos = np.asarray(self.gripper.qpos_index)
        self._gripper_qvel = np.asarray(self.gripper.qvel_index)
        nv = self._model.nv
        # both Jacobians in one buffer (mj_jacSite fills the two halves, contiguous views)
        self._jac = np.zeros((6, nv))
        self._jacp, self._jacr = self._jac[:3], self._jac[3:]
        self._ref_xpos = sim.data.site_xpos[self._ref_site]  # views into MuJoCo's data
        self._ref_xmat = sim.data.site_xmat[self._ref_site].reshape([3, 3])
        self._full_mass = np.ndarray(shape=(nv, nv), dtype=np.float64, order="C")
        # the controller's frame is the robot's fixed base: its site neither moves nor has a
        # Jacobian (robosuite queries both at every sub-step; they are the same every time)
        base_jacp, base_jacr = np.zeros((3, nv)), np.zeros((3, nv))
        base_site = sim.model.site_name2id(f"{arm.naming_prefix}{arm.part_name}_center")
        mujoco.mj_jacSite(self._model, self._data, base_jacp, base_jacr, base_site)
        self._base_jacp, self._base_jacr = base_jacp, base_jacr
        # constant over the control step: the goal in the world frame, the gains
        self._goal_pos = arm.origin_pos + np.dot(arm.origin_ori, arm.goal_pos)
        self._goal_ori = np.dot(arm.origin_ori, arm.goal_ori)
        self._kp_pos, self._kp_ori = np.array(arm.kp[0:3]), np.array(arm.kp[3:6])
        self._kd_pos, self._kd_ori = arm.kd[0:3], arm.kd[3:6]
        # the gripper's command (bias + weight * goal) is the same at every sub-step
        ranges, indexes = sim.model.actuator_ctrlrange, robot._ref_actuators_indexes_dict
        self._arm_actuators = index = indexes[name]
        self._arm_low, self._arm_high = ranges[index, 0], ranges[index, 1]
        self._gripper_actuators = index = indexes[next(key for key in parts if key != name)]
        self._gripper_command = np.clip(self.gripper.vels, ranges[index, 0], ranges[index, 1])

    def substep(self) -> None:
        """One sub-step: the arm's ``update`` and ``run_controller``, the gripper's ``update``,
        the clipped commands written to ``ctrl``."""
        arm, qvel, index = self.arm, self._qvel, self._arm_qvel
        jacp, jacr, mujoco = self._jacp, self._jacr, self._mujoco
        # Controller.update: end-effector pose, velocity and Jacobians, joints, mass matrix
        mujoco.mj_jacSite(self._model, self._data, jacp, jacr, self._ref_site)
        arm.ref_pos[:] = self._ref_xpos
        arm.ref_ori_mat[:, :] = self._ref_xmat
        np.dot(jacp, qvel, out=arm.ref_pos_vel)
        np.dot(jacr, qvel, out=arm.ref_ori_vel)
        np.take(self._jac, index, axis=1, out=arm.J_full)  # np.vstack([J_pos, J_ori])
        arm.J_pos[:, :] = arm.J_full[:3]
        arm.J_ori[:, :] = arm.J_full[3:]
        arm.joint_pos = self._qpos.take(self._arm_qpos)
        arm.joint_vel = qvel.take(index)
        mujoco.mj_fullM(self._model, self._full_mass, self._data.qM)
        arm.mass_matrix = mass_matrix = self._full_mass[index, :][:, index]
        # OperationalSpaceController.run_controller
        ori_error = self._orientation_error(self._goal_ori, arm.ref_ori_mat)
        position_error = self._goal_pos - arm.ref_pos
        vel_pos_error = -(arm.ref_pos_vel - np.dot(self._base_jacp, qvel))
        desired_force = position_error * self._kp_pos + vel_pos_error * self._kd_pos
        vel_ori_error = -(arm.ref_ori_vel - np.dot(self._base_jacr, qvel))
        desired_torque = ori_error * self._kp_ori + vel_ori_error * self._kd_ori
        _, lambda_pos, lambda_ori, nullspace_matrix = self._opspace_matrices(
            mass_matrix, arm.J_full, arm.J_pos, arm.J_ori
        )
        wrench = np.concatenate(
            [np.dot(lambda_pos, desired_force), np.dot(lambda_ori, desired_torque)]
        )
        torques = np.dot(arm.J_full.T, wrench) + self._qfrc_bias.take(index)
        torques += self._nullspace_torques(
            mass_matrix, nullspace_matrix, arm.initial_joint, arm.joint_pos, arm.joint_vel
        )
        arm.torques = torques
        # SimpleGripController.update; its command is the same at every sub-step
        gripper = self.gripper
        gripper.joint_pos = self._qpos.take(self._gripper_qpos)
        gripper.joint_vel = qvel.take(self._gripper_qvel)
        self._ctrl[self._arm_actuators] = torques.clip(self._arm_low, self._arm_high)
        self._ctrl[self._gripper_actuators] = self._gripper_command
