"""robosuite's control step for the OSC arm and gripper, bit for bit, mostly compiled.

robosuite plays a control step as 25 physics sub-steps (``control_freq=20``) and recomputes its
controllers in Python at each, with name look-ups, the action space rebuilt several times and
Jacobians queried four times; that Python was most of a step's time. :class:`FastControl`
replaces ``env.step`` with the same step:

* the policy sub-step (the new action sets the goals) runs robosuite's own ``set_goal`` and
  gripper code; the arm's update before it and its torques after it are computed by the
  compiled kernel (:mod:`.substep_kernel`), and the proprioceptive buffers robosuite pushes at a
  policy step are pushed the same way;
* the other sub-steps run in the kernel, MuJoCo's ``mj_step1``/``mj_step2`` included, with the
  same MuJoCo queries and the same arithmetic (robosuite's own compiled ``opspace_matrices``,
  ``nullspace_torques`` and ``orientation_error``) in the same order on arrays of the same
  layout, so every float is the same;
* between sub-steps, the observables' clocks are advanced by :class:`.ObservableClock` with
  robosuite's own float operations, and an observable's update runs for real at the sub-step
  where one samples.

The controllers' attributes (pose, Jacobians, mass matrix, torques, update flags) and the
robot's buffers are left as robosuite leaves them, so a snapshot or robosuite's next step sees
the same state (``tests/robotics/test_fast_control.py`` compares all of it, every step).

It covers one fixed-base robot with robosuite's basic composite controller, an OSC arm
(``OSC_POSE``, the default, or ``OSC_POSITION``) of fixed impedance in the base frame
without interpolation, and a ``GRIP`` gripper of any number of joints and actuators (none for
Wipe's), with lite physics, robosuite's numba on and at least one physics sub-step per
control step (``control_freq`` up to 500): the single-arm tasks with Panda, Sawyer, UR5e,
Kinova3, Jaco or PandaDexRH/LH and robosuite's grippers
(``tests/robotics/test_fast_control_sweep.py`` plays them). A viewer hands the step back
to robosuite. Before it turns on, it checks that the installed robosuite
is the code it reproduces (:mod:`.proven_code`) and that the kernel's BLAS gives numpy's
floats on this machine (:mod:`.blas_check`). :func:`unsupported_reason` says why a set-up is
not covered (it then keeps robosuite's own path). A deep copy of the env gets its own fast
step (nothing the kernel holds is shared with the original).

Example (needs robosuite)::

    env = robosuite.make(
        "Lift", has_renderer=False, has_offscreen_renderer=False, use_camera_obs=False
    )
    if unsupported_reason(env) is None:
        FastControl(env).install()      # env.step now runs the fast step
"""

from __future__ import annotations

from typing import Any

import numpy as np

from wmrl_env.envs.robosuite.observable_clock import ObservableClock
from wmrl_env.envs.robosuite.proven_code import mismatch

__all__ = ["FastControl", "unsupported_reason"]


def unsupported_reason(env: Any) -> str | None:
    """Why :class:`FastControl` cannot play ``env``'s sub-steps, or ``None`` if it can."""
    from robosuite import macros
    from robosuite.controllers.composite.composite_controller import CompositeController
    from robosuite.controllers.parts.arm.osc import OperationalSpaceController
    from robosuite.controllers.parts.gripper.simple_grip import SimpleGripController
    from robosuite.environments.base import MujocoEnv
    from robosuite.environments.robot_env import RobotEnv
    from robosuite.robots.fixed_base_robot import FixedBaseRobot
    from robosuite.utils.binding_utils import MjSim
    from robosuite.utils.observables import Observable

    from wmrl_env.envs.robosuite.blas_check import blas_disagreement

    changed = mismatch()
    if changed is not None:
        return changed
    if type(env)._pre_action is not RobotEnv._pre_action:
        return f"{type(env).__name__} overrides robosuite's _pre_action"
    for method in ("step", "_update_observables"):
        if getattr(type(env), method) is not getattr(MujocoEnv, method):
            return f"{type(env).__name__} overrides robosuite's {method}"
    if type(env.sim).step1 is not MjSim.step1 or type(env.sim).step2 is not MjSim.step2:
        return f"simulation {type(env.sim).__name__} overrides MjSim's step1 or step2"
    if not macros.ENABLE_NUMBA:
        return "robosuite's numba is off (macros.ENABLE_NUMBA)"
    if any(type(o).update is not Observable.update for o in env._observables.values()):
        return "an observable overrides robosuite's Observable.update"
    if not env.lite_physics:
        return "lite_physics is off"
    if int(env.control_timestep / env.model_timestep) < 1:
        return (
            f"control_freq {env.control_freq} is above the physics rate "
            f"({1 / env.model_timestep:g} Hz): robosuite plays no sub-step"
        )
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
    return blas_disagreement(model.nv, len(arm.qvel_index))


class FastControl:
    """Plays ``env``'s control steps as robosuite does (see the module docstring);
    :meth:`install` makes ``env.step`` use it. Raises ``ValueError`` for an env it does not
    cover, with :func:`unsupported_reason`'s reason."""

    def __init__(self, env: Any) -> None:
        reason = unsupported_reason(env)
        if reason is not None:
            raise ValueError(f"FastControl does not cover this env: {reason}")
        self.env = env
        self._robosuite_step = env.step
        self._clock = ObservableClock(env)
        self._substeps: _Substeps | None = None
        self._action_dim = env.action_dim

    def __getstate__(self) -> dict[str, Any]:
        """A copy (``copy.deepcopy``, pickling) rebuilds the kernel's arguments for its own
        env: they hold raw addresses of this env's MuJoCo data and views of its arrays."""
        return {**self.__dict__, "_substeps": None}

    def _substeps_of(self, env: Any) -> _Substeps:
        """The kernel's arguments, made again where a hard reset made a new simulation or new
        controllers."""
        owners = _Substeps.owners_of(env)
        if self._substeps is None or any(
            a is not b for a, b in zip(self._substeps.owners, owners, strict=True)
        ):
            self._substeps = _Substeps(env)
        return self._substeps

    def _policy_substep(self, action: np.ndarray, substeps: _Substeps) -> None:
        """robosuite's ``RobotEnv._pre_action(action, policy_step=True)`` for the one robot
        (``FixedBaseRobot.control``): the goals set by robosuite's own ``set_goal``, the arm's
        update before it and its torques after it compiled, the proprioceptive buffers pushed."""
        env, arm = self.env, substeps.arm
        if not arm.new_update:  # robosuite's set_goal keeps an older update: its own path
            env._pre_action(action, True)
            substeps.start()
            return
        if len(action) != self._action_dim:
            raise AssertionError(
                f"environment got invalid action dimension -- expected {self._action_dim}, "
                f"got {len(action)}"
            )
        robot = env.robots[0]
        composite = robot.composite_controller
        composite.update_state()
        substeps.update()  # Controller.update, as set_goal's own would make it
        composite.set_goal(action)
        composite.update_state()  # CompositeController.run_controller begins with it
        substeps.gripper.run_controller()
        substeps.start()
        substeps.run(1, physics=False)  # the arm's run_controller, both commands to ctrl
        substeps.finish()
        arm.new_update = True  # Controller.run_controller's cleanup
        _push_proprioception(robot, action)

    def install(self) -> None:
        """Route ``env.step`` through :meth:`step`."""
        self.env.step = self.step

    def step(self, action: np.ndarray) -> tuple[dict, float, bool, dict]:
        """robosuite's ``MujocoEnv.step`` (see the module docstring): the policy sub-step, the
        others compiled, observables updated where one samples and their clocks advanced
        elsewhere."""
        env = self.env
        if env.viewer is not None or env.viewer_get_obs:
            return self._robosuite_step(action)  # robosuite's own loop drives its viewer
        if env.done:
            raise ValueError("executing action in terminated episode")
        env.timestep += 1
        env.sim.step1()
        substeps = self._substeps_of(env)
        self._policy_substep(action, substeps)
        env.sim.step2()
        if not self._clock.advance_quietly(1):
            env._update_observables()  # an observable samples after the policy sub-step
        left = int(env.control_timestep / env.model_timestep) - 1
        while left:
            quiet = self._clock.advance_quietly(left)
            played = min(quiet + 1, left)  # the quiet sub-steps and the one that samples
            substeps.run(played)
            if quiet < played:
                env._update_observables()
            left -= played
        substeps.finish()
        env.cur_time += env.control_timestep
        reward, done, info = env._post_action(action)
        return env._get_observations(), reward, done, info


class _Substeps:
    """robosuite's ``FixedBaseRobot.control`` with ``policy_step=False`` (the
    ``OperationalSpaceController``'s and ``SimpleGripController``'s ``run_controller`` and
    ``update``) for the sub-steps after a control step's first, as the compiled kernel's
    arguments. They are made once per simulation and controllers (a hard reset makes new ones);
    what is constant over a control step (the goal in the world frame, the gains, the gripper's
    command) is written in place at each :meth:`start`."""

    def __init__(self, env: Any) -> None:
        import mujoco

        from wmrl_env.envs.robosuite.substep_kernel import mujoco_functions, run_substeps

        self._run_substeps = run_substeps
        robot, sim = env.robots[0], env.sim
        parts = robot.composite_controller.part_controllers
        name = robot.arms[0]
        self.arm = arm = parts[name]
        self.gripper = gripper = next(part for key, part in parts.items() if key != name)
        self.owners = self.owners_of(env)
        model, data = sim.model._model, sim.data._data
        nv = model.nv
        # the controller's frame is the robot's fixed base: its site neither moves nor has a
        # Jacobian (robosuite queries both at every sub-step; they are the same every time)
        base_jacp, base_jacr = np.zeros((3, nv)), np.zeros((3, nv))
        base_site = sim.model.site_name2id(f"{arm.naming_prefix}{arm.part_name}_center")
        mujoco.mj_jacSite(model, data, base_jacp, base_jacr, base_site)
        ranges, indexes = sim.model.actuator_ctrlrange, robot._ref_actuators_indexes_dict
        arm_actuators = _indexes(indexes[name])
        gripper_actuators = _indexes(indexes[next(key for key in parts if key != name)])
        self._gripper_range = ranges[gripper_actuators, 0], ranges[gripper_actuators, 1]
        size, gripper_size = len(arm.qvel_index), len(gripper.qvel_index)
        self._goal_pos, self._goal_ori = np.empty(3), np.empty((3, 3))
        self._gains = np.empty((4, 3))  # kp position, kp orientation, kd position, kd orientation
        self._initial_joint = np.empty(size)
        self._gripper_command = np.empty(len(gripper_actuators))  # one per actuator
        # what the kernel leaves: the arm's joint_pos, joint_vel, mass_matrix (in Fortran
        # order, as numpy's indexing makes it) and torques, the gripper's joint_pos, joint_vel
        self._outputs = (
            np.empty(size), np.empty(size), np.empty((size, size), order="F"), np.empty(size),
            np.empty(len(gripper.qpos_index)), np.empty(gripper_size),
        )  # fmt: skip
        self._arguments = (
            mujoco_functions(), model._address, data._address,
            sim.model.site_name2id(arm.ref_name),
            _indexes(arm.qpos_index), _indexes(arm.qvel_index),
            _indexes(gripper.qpos_index), _indexes(gripper.qvel_index),
            arm_actuators, gripper_actuators,
            ranges[arm_actuators, 0], ranges[arm_actuators, 1], self._gripper_command,
            data.qpos, data.qvel, data.qM, data.qfrc_bias, data.ctrl, data.site_xpos,
            data.site_xmat, np.zeros((6, nv)), np.empty((nv, nv)), base_jacp, base_jacr,
            self._goal_pos, self._goal_ori, *self._gains, self._initial_joint,
            arm.ref_pos, arm.ref_ori_mat, arm.ref_pos_vel, arm.ref_ori_vel,
            arm.J_full, arm.J_pos, arm.J_ori, *self._outputs,
        )  # fmt: skip
        self._played = False

    @staticmethod
    def owners_of(env: Any) -> tuple[Any, ...]:
        """What the kernel's arguments belong to: the simulation, the controllers and the arrays
        robosuite updates in place."""
        robot = env.robots[0]
        parts = robot.composite_controller.part_controllers
        arm = parts[robot.arms[0]]
        in_place = ("ref_pos", "ref_ori_mat", "ref_pos_vel", "ref_ori_vel", "J_full", "J_pos",
                    "J_ori")  # fmt: skip
        return (env.sim, *parts.values(), *(getattr(arm, name) for name in in_place))

    def start(self) -> None:
        """Take this control step's goal, gains and gripper command from the controllers."""
        arm = self.arm
        np.dot(arm.origin_ori, arm.goal_pos, out=self._goal_pos)
        self._goal_pos += arm.origin_pos
        np.dot(arm.origin_ori, arm.goal_ori, out=self._goal_ori)
        self._gains[:] = arm.kp[0:3], arm.kp[3:6], arm.kd[0:3], arm.kd[3:6]
        self._initial_joint[:] = arm.initial_joint
        np.clip(self.gripper.vels, *self._gripper_range, out=self._gripper_command)
        self._played = False

    def update(self) -> None:
        """The arm's ``Controller.update`` (pose, velocities, Jacobians, joints, mass matrix)."""
        self._run_substeps(1, False, False, *self._arguments)
        arm = self.arm
        arm.joint_pos, arm.joint_vel, arm.mass_matrix = (
            output.copy(order="K") for output in self._outputs[:3]
        )
        arm.new_update = False

    def run(self, count: int, physics: bool = True) -> None:
        """Play ``count`` sub-steps (no observable updates between them); ``physics=False``
        computes one sub-step's commands without MuJoCo's step."""
        self._run_substeps(count, physics, True, *self._arguments)
        self._played = self._played or count > 0

    def finish(self) -> None:
        """Leave the controllers' attributes as robosuite's last sub-step leaves them."""
        if self._played:
            arm, gripper = self.arm, self.gripper
            arm.joint_pos, arm.joint_vel, arm.mass_matrix, arm.torques, *rest = (
                output.copy(order="K") for output in self._outputs
            )
            gripper.joint_pos, gripper.joint_vel = rest


def _indexes(values: Any) -> np.ndarray:
    """Index values as the integer array the kernel takes (an empty list too)."""
    return np.asarray(values, dtype=np.intp)


def _push_proprioception(robot: Any, action: np.ndarray) -> None:
    """What robosuite's ``FixedBaseRobot.control`` records at a policy step (recent joint
    positions, actions, torques; per arm the end-effector's force-torque, pose, velocity and
    smoothed acceleration), operation for operation."""
    import robosuite.utils.transform_utils as transforms

    robot.recent_qpos.push(robot._joint_positions)
    robot.recent_actions.push(action)
    robot.recent_torques.push(robot.torques)
    for name in robot.arms:
        controller = robot.part_controllers[name]
        robot.recent_ee_forcetorques[name].push(
            np.concatenate((robot.ee_force[name], robot.ee_torque[name]))
        )
        robot.recent_ee_pose[name].push(
            np.concatenate((controller.ref_pos, transforms.mat2quat(controller.ref_ori_mat)))
        )
        velocity = np.concatenate((controller.ref_pos_vel, controller.ref_ori_vel))
        robot.recent_ee_vel[name].push(velocity)
        robot.recent_ee_vel_buffer[name].push(velocity)
        diffs = np.vstack(
            [
                robot.recent_ee_acc[name].current,
                robot.control_freq * np.diff(robot.recent_ee_vel_buffer[name].buf, axis=0),
            ]
        )
        acceleration = np.array(
            [np.convolve(column, np.ones(10) / 10.0, mode="valid")[0] for column in diffs.T]
        )
        robot.recent_ee_acc[name].push(acceleration)
