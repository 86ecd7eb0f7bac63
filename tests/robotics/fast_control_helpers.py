"""Shared helpers of the FastControl tests: robosuite env pairs (its own path and the fast
step) played side by side, with every output and every piece of state compared."""

from __future__ import annotations

from typing import Any

import numpy as np


def make_raw(task: str = "Lift", robots: Any = "Panda", gripper: Any = "default", **kwargs: Any):
    """A headless robosuite env (no camera observations), seeded; ``gripper`` as robosuite's
    ``gripper_types`` (``None``: no gripper), ``"default"`` the robot's or the task's own."""
    import robosuite

    options = {"horizon": 40, "seed": 0, **kwargs}
    if gripper != "default":  # Wipe refuses even the word "default"
        options["gripper_types"] = gripper
    return robosuite.make(
        task, robots=robots, has_renderer=False, has_offscreen_renderer=False,
        use_camera_obs=False, **options,
    )  # fmt: skip


def actions(seed: int, n: int, dim: int = 7) -> np.ndarray:
    """Random commands, with runs at the bounds (gripper held closed or open, arm pushed to the
    edge of its range) where clipping matters."""
    rng = np.random.default_rng(seed)
    drawn = rng.uniform(-1, 1, (n, dim))
    drawn[n // 3 : n // 2] = np.sign(drawn[n // 3 : n // 2])
    return drawn.astype(np.float32)


def physics(raw: Any) -> tuple[np.ndarray, ...]:
    """The MuJoCo state of a robosuite env (copies)."""
    data = raw.sim.data
    return data.qpos.copy(), data.qvel.copy(), data.ctrl.copy(), data.qacc.copy(), data.time


def _plain_state(thing: Any) -> dict:
    """Every plain attribute (arrays, numbers, flags) of an object."""
    return {
        name: value
        for name, value in vars(thing).items()
        if value is None or isinstance(value, np.ndarray | float | int | bool | np.floating)
    }


def robot_state(raw: Any) -> dict:
    """Beyond a snapshot: every plain attribute of each part controller (cached kinematics,
    torques, update flags, origins) and of each proprioceptive buffer the robot pushes at a
    policy step, and the observables' clocks."""
    robot = raw.robots[0]
    parts = robot.composite_controller.part_controllers
    state = {f"controller {name}": _plain_state(part) for name, part in parts.items()}
    for name, buffer in vars(robot).items():
        if name.startswith("recent_"):
            buffers = buffer if isinstance(buffer, dict) else {"": buffer}
            for arm, each in buffers.items():
                state[f"{name} {arm}"] = _plain_state(each)
    for name, observable in raw._observables.items():
        state[f"observable {name}"] = _plain_state(observable)
    return state


def assert_same(a: Any, b: Any, where: str = "snapshot") -> None:
    """``a`` and ``b`` hold the same floats (nested dicts and lists compared item by item)."""
    if isinstance(a, dict | list | tuple):
        assert len(a) == len(b), where
        keys = a.keys() if isinstance(a, dict) else range(len(a))
        for key in keys:
            assert_same(a[key], b[key], f"{where}[{key!r}]")
    else:
        assert np.array_equal(np.asarray(a), np.asarray(b)), f"{where} differs"


def assert_same_raw_play(own: Any, fast: Any, commands: np.ndarray) -> int:
    """Two robosuite envs (built alike) from a reset through ``commands``: observations,
    rewards, done flags, infos, the MuJoCo state, the controllers, the robot's buffers and the
    observables equal at every step; returns the steps played."""
    assert_same(own.reset(), fast.reset(), "reset")
    for step, command in enumerate(commands.astype(np.float64)):
        a, b = own.step(command), fast.step(command)
        assert_same(a, b, f"step {step}: outputs")
        assert_same(physics(own), physics(fast), f"step {step}: MuJoCo state")
        assert_same(robot_state(own), robot_state(fast), f"step {step}: robot")
        if a[2]:
            return step + 1
    return len(commands)
