"""robosuite's OSC arm and gripper sub-steps compiled with numba, MuJoCo called from inside.

:func:`run_substeps` plays ``count`` physics sub-steps of a control step: ``mj_step1``, the
controllers' update (robosuite's ``OperationalSpaceController.run_controller`` and
``SimpleGripController`` with ``policy_step=False``), the clipped commands written to ``ctrl``,
``mj_step2``. It makes the same MuJoCo calls (MuJoCo's C functions through their addresses,
:func:`mujoco_functions`) and the same arithmetic (robosuite's own compiled ``opspace_matrices``,
``nullspace_torques``, ``orientation_error`` on arrays of the same layout) in the same order as
robosuite's Python; it leaves the controllers' last-sub-step values in the arrays it is given.
Its matrix-vector products (``np.dot``) go through numba's BLAS (SciPy's), not numpy's: they
give numpy's floats only where both libraries pick the same kernels, which
:func:`kernel_products` lets :mod:`.blas_check` test on the machine before the kernel is used.
numba compiles it on first use and caches it on disk (``__pycache__``; a few seconds the first
time).

This module needs robosuite (and the numba it depends on); it is imported only where a
:class:`~wmrl_env.envs.robosuite.fast_control.FastControl` is made.

Example (needs robosuite)::

    functions = mujoco_functions()   # addresses of mj_step1, mj_step2, mj_jacSite, mj_fullM
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os

import mujoco
import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic
from robosuite.utils.control_utils import nullspace_torques, opspace_matrices, orientation_error

__all__ = ["kernel_products", "mujoco_functions", "run_substeps"]


@functools.cache
def mujoco_functions() -> tuple[int, int, int, int]:
    """The addresses of ``mj_step1``, ``mj_step2``, ``mj_jacSite`` and ``mj_fullM`` in the MuJoCo
    library the ``mujoco`` package loaded (passed to the kernel as arguments, so that the
    compiled kernel holds no address and can be cached)."""
    folder = os.path.dirname(mujoco.__file__)
    found = glob.glob(os.path.join(folder, f"libmujoco.so.{mujoco.__version__}"))
    found = found or glob.glob(os.path.join(folder, "libmujoco*.so*"))
    if not found:
        raise OSError(f"no MuJoCo shared library beside {mujoco.__file__}")
    library = ctypes.CDLL(found[0])
    names = ("mj_step1", "mj_step2", "mj_jacSite", "mj_fullM")
    return tuple(ctypes.cast(getattr(library, name), ctypes.c_void_p).value for name in names)


@intrinsic
def _call(typingctx, address, arguments):
    """``address(*arguments)`` for a C function returning ``void`` whose arguments are
    integers (pointers given as addresses), each passed at its own width."""
    if not isinstance(address, types.Integer) or not all(
        isinstance(argument, types.Integer) for argument in arguments
    ):
        return None

    def codegen(context, builder, signature, args):
        widths = [context.get_value_type(argument) for argument in arguments]
        function_type = ir.FunctionType(ir.VoidType(), widths)
        function = builder.inttoptr(args[0], function_type.as_pointer())
        builder.call(function, [builder.extract_value(args[1], i) for i in range(len(widths))])
        return context.get_dummy_value()

    return types.void(address, arguments), codegen


def _run_substeps(  # one flat argument list: what numba passes cheapest
    count, physics, control, functions, model, data, ref_site,
    arm_qpos, arm_qvel, gripper_qpos, gripper_qvel,
    arm_actuators, gripper_actuators, arm_low, arm_high, gripper_command,
    qpos, qvel, qm, qfrc_bias, ctrl, site_xpos, site_xmat, jac, full_mass,
    base_jacp, base_jacr, goal_pos, goal_ori, kp_pos, kp_ori, kd_pos, kd_ori, initial_joint,
    ref_pos, ref_ori_mat, ref_pos_vel, ref_ori_vel, j_full, j_pos, j_ori,
    joint_pos, joint_vel, mass_matrix, torques, gripper_pos, gripper_vel,
):  # fmt: skip
    """``count`` sub-steps (the arrays after ``functions`` are read or written in place).
    ``physics=False`` leaves out ``mj_step1`` and ``mj_step2`` (the policy sub-step, whose
    physics robosuite's own code surrounds); ``control=False`` stops after the controllers'
    update (what ``OperationalSpaceController.update`` computes before ``set_goal``)."""
    step1, step2, jac_site, full_mass_matrix = functions
    nv = jac.shape[1]
    size = arm_qvel.shape[0]
    jacp, jacr = jac[:3], jac[3:]
    for _ in range(count):
        if physics:
            _call(step1, (model, data))
        # Controller.update: end-effector pose, velocity and Jacobians, joints, mass matrix
        _call(jac_site, (model, data, jac.ctypes.data, jac.ctypes.data + 3 * nv * 8,
                         np.int32(ref_site)))  # fmt: skip
        for r in range(3):
            ref_pos[r] = site_xpos[ref_site, r]
            for c in range(3):
                ref_ori_mat[r, c] = site_xmat[ref_site, 3 * r + c]
        ref_pos_vel[:] = np.dot(jacp, qvel)
        ref_ori_vel[:] = np.dot(jacr, qvel)
        for r in range(6):
            for c in range(size):
                j_full[r, c] = jac[r, arm_qvel[c]]
        for r in range(3):
            for c in range(size):
                j_pos[r, c] = j_full[r, c]
                j_ori[r, c] = j_full[3 + r, c]
        for c in range(size):
            joint_pos[c] = qpos[arm_qpos[c]]
            joint_vel[c] = qvel[arm_qvel[c]]
        _call(full_mass_matrix, (model, full_mass.ctypes.data, qm.ctypes.data))
        mass = np.empty((size, size)).T  # Fortran order, as numpy's [index, :][:, index]
        for r in range(size):
            for c in range(size):
                mass[r, c] = full_mass[arm_qvel[r], arm_qvel[c]]
        mass_matrix[:, :] = mass
        if not control:
            continue
        # OperationalSpaceController.run_controller
        ori_error = orientation_error(goal_ori, ref_ori_mat)
        position_error = goal_pos - ref_pos
        vel_pos_error = -(ref_pos_vel - np.dot(base_jacp, qvel))
        desired_force = position_error * kp_pos + vel_pos_error * kd_pos
        vel_ori_error = -(ref_ori_vel - np.dot(base_jacr, qvel))
        desired_torque = ori_error * kp_ori + vel_ori_error * kd_ori
        _, lambda_pos, lambda_ori, nullspace_matrix = opspace_matrices(mass, j_full, j_pos, j_ori)
        wrench = np.concatenate(
            (np.dot(lambda_pos, desired_force), np.dot(lambda_ori, desired_torque))
        )
        arm_torques = np.dot(j_full.T, wrench) + qfrc_bias[arm_qvel]
        arm_torques += nullspace_torques(
            mass, nullspace_matrix, initial_joint, joint_pos, joint_vel
        )
        # GripperController.update; the gripper's command is the same at every sub-step
        for c in range(gripper_qpos.shape[0]):
            gripper_pos[c] = qpos[gripper_qpos[c]]
        for c in range(gripper_qvel.shape[0]):
            gripper_vel[c] = qvel[gripper_qvel[c]]
        for c in range(size):  # numpy's clip, NaN kept: min(max(x, low), high)
            value = arm_torques[c]
            if not (np.isnan(value) or value > arm_low[c]):
                value = arm_low[c]
            if not (np.isnan(value) or value < arm_high[c]):
                value = arm_high[c]
            ctrl[arm_actuators[c]] = value
        for c in range(gripper_actuators.shape[0]):
            ctrl[gripper_actuators[c]] = gripper_command[c]
        torques[:] = arm_torques
        if physics:
            _call(step2, (model, data))


def _kernel_products(jacp, qvel, lambda_pos, force, j_full, wrench):
    """The kernel's matrix-vector products on the same layouts: a site's velocity (a C-ordered
    ``3 x nv`` Jacobian block times ``qvel``), a ``3 x 3`` lambda times a force, and the arm
    Jacobian's transpose (Fortran-ordered) times a wrench."""
    return np.dot(jacp, qvel), np.dot(lambda_pos, force), np.dot(j_full.T, wrench)


def _compiled(function):
    try:  # cached on disk beside this file, else in the user's cache folder
        return numba.njit(nogil=True, cache=True)(function)
    except RuntimeError:  # nowhere writable to cache: compiled in memory, once per process
        return numba.njit(nogil=True)(function)


run_substeps = _compiled(_run_substeps)
kernel_products = _compiled(_kernel_products)
