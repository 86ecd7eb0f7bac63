"""Exact snapshots of a robosuite environment, for bit-identical group starts.

A GRPO group is G rollouts from one start. Resetting G environments with the same seed is not
enough (robosuite's own ``reset(seed)`` does not reproduce), and restoring ``qpos``/``qvel``
alone is not either: MuJoCo's solver warm start, the grippers' latched actions and the
controllers' goals all carry over between steps. A snapshot holds all of them:

* the full MuJoCo integration state (``mj_getState(mjSTATE_INTEGRATION)``: time, qpos, qvel,
  act, warm start, controls, applied forces, mocap),
* the environment's ``timestep`` and ``cur_time``,
* each gripper's ``current_action`` and each controller's goals and reset posture,
* each observable's sampling phase and last sampled value: robosuite samples observations
  part-way through a control step, so an observation is not a function of the physics state
  alone, and a forced re-sample would shift every later observation.

Snapshots are plain data (dicts of numbers and arrays), so they cross process boundaries (see
:mod:`wmrl_env.envs.remote`) and pickle safely. The functions work for robosuite 1.4 (used by
LIBERO) and 1.5.

Example (needs robosuite)::

    snapshot = take_snapshot(env)          # env: a robosuite environment
    restore_snapshot(env, snapshot)        # an env whose model matches (same arguments, and
                                           # for tasks that write the model at reset, same seed)
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import numpy as np

__all__ = [
    "SNAPSHOT_FORMAT",
    "model_fingerprint",
    "reset_actuation",
    "restore_snapshot",
    "take_snapshot",
]

SNAPSHOT_FORMAT = "wmrl-robosuite-snapshot/1"

# controller attributes that persist between policy steps: goals, the posture the nullspace
# controller pulls towards (``initial_joint``, set at reset) and gains
_PERSISTENT_CONTROLLER_PREFIXES = ("goal", "initial")
_PERSISTENT_CONTROLLER_ATTRIBUTES = ("relative_ori", "ori_ref", "kp", "kd")
# MjData fields of the integration state, for MuJoCo releases without ``mj_getState``
_LEGACY_PHYSICS_FIELDS = (
    "qpos",
    "qvel",
    "act",
    "qacc_warmstart",
    "ctrl",
    "qfrc_applied",
    "xfrc_applied",
    "mocap_pos",
    "mocap_quat",
    "userdata",
)


def _raw(sim: Any) -> tuple[Any, Any]:
    """The ``mujoco.MjModel`` and ``mujoco.MjData`` behind robosuite's ``MjSim``."""
    return sim.model._model, sim.data._data


# MjModel fields that robosuite randomises when it builds a model (object sizes, masses)
_FINGERPRINT_MODEL_FIELDS = ("geom_size", "geom_pos", "body_pos", "body_mass", "body_inertia")


def model_fingerprint(sim: Any) -> str:
    """A short hash of the model fields that differ between separately built environments.

    robosuite draws object sizes when it builds the model, and some tasks write the model at
    reset (Door's placement); snapshots only transfer between environments whose models agree,
    which this fingerprint checks.
    """
    model, _ = _raw(sim)
    digest = hashlib.sha1()
    for name in _FINGERPRINT_MODEL_FIELDS:
        digest.update(np.ascontiguousarray(getattr(model, name)).tobytes())
    return digest.hexdigest()[:16]


def _get_physics(sim: Any) -> np.ndarray:
    import mujoco

    model, data = _raw(sim)
    if hasattr(mujoco, "mj_getState"):
        spec = mujoco.mjtState.mjSTATE_INTEGRATION
        state = np.empty(mujoco.mj_stateSize(model, spec), dtype=np.float64)
        mujoco.mj_getState(model, data, state, spec)
        return state
    parts = [np.array([data.time])] + [
        np.asarray(getattr(data, name), dtype=np.float64).ravel() for name in _LEGACY_PHYSICS_FIELDS
    ]
    return np.concatenate(parts)


def _set_physics(sim: Any, state: np.ndarray) -> None:
    import mujoco

    model, data = _raw(sim)
    expected = _get_physics(sim).shape[0]
    if state.shape != (expected,):
        raise ValueError(
            f"snapshot physics state has shape {state.shape}, this simulation expects "
            f"({expected},): was the snapshot taken from an environment built differently?"
        )
    if hasattr(mujoco, "mj_setState"):
        mujoco.mj_setState(model, data, state, mujoco.mjtState.mjSTATE_INTEGRATION)
        return
    data.time, offset = state[0], 1
    for name in _LEGACY_PHYSICS_FIELDS:
        field = getattr(data, name)
        field.flat[:] = state[offset : offset + field.size]
        offset += field.size


def _grippers(env: Any) -> Iterator[Any]:
    """Every gripper model: robosuite 1.5 keeps a dict per arm, 1.4 a single gripper."""
    for robot in env.robots:
        grippers = getattr(robot, "gripper", None)
        if isinstance(grippers, dict):
            yield from (grippers[arm] for arm in sorted(grippers))
        elif grippers is not None:
            yield grippers


def _controllers(env: Any) -> Iterator[Any]:
    """Every part controller: 1.5 has composite controllers, 1.4 one controller per robot."""
    for robot in env.robots:
        composite = getattr(robot, "composite_controller", None)
        if composite is not None:
            parts = composite.part_controllers
            yield from (parts[name] for name in sorted(parts))
        elif getattr(robot, "controller", None) is not None:
            yield robot.controller


def reset_actuation(env: Any) -> None:
    """Open-loop actuation state back to a fresh start: grippers' latched actions to zero,
    every controller's cached kinematics recomputed and its goal set to the current pose.

    Needed after writing the simulation state directly (LIBERO's ``set_init_state``): the
    latched gripper action and the cached kinematics otherwise carry over from the previous
    episode, so the next steps depend on what the environment did before.
    """
    for gripper in _grippers(env):
        gripper.current_action = np.zeros_like(gripper.current_action)
    for controller in _controllers(env):
        controller.new_update = True
        controller.update(force=True)
        controller.reset_goal()


def _is_plain(value: Any) -> bool:
    return value is None or isinstance(value, (np.ndarray, float, int, bool, np.floating))


def _copy(value: Any) -> Any:
    return value.copy() if isinstance(value, np.ndarray) else value


def _controller_state(controller: Any) -> dict[str, Any]:
    state = {
        name: _copy(value)
        for name, value in vars(controller).items()
        if (
            name.startswith(_PERSISTENT_CONTROLLER_PREFIXES)
            or name in _PERSISTENT_CONTROLLER_ATTRIBUTES
        )
        and _is_plain(value)
    }
    for name in ("interpolator_pos", "interpolator_ori"):
        interpolator = getattr(controller, name, None)
        if interpolator is not None:
            state[name] = {k: _copy(v) for k, v in vars(interpolator).items() if _is_plain(v)}
    return state


def _set_controller_state(controller: Any, state: dict[str, Any]) -> None:
    for name, value in state.items():
        if name.startswith("interpolator_"):
            interpolator = getattr(controller, name)
            for key, inner in value.items():
                setattr(interpolator, key, _copy(inner))
        else:
            setattr(controller, name, _copy(value))


# Observable attributes that carry over between steps (robosuite 1.4 and 1.5 alike)
_OBSERVABLE_ATTRIBUTES = (
    "_time_since_last_sample",
    "_current_delay",
    "_current_observed_value",
    "_sampled",
)


def _observables_state(env: Any) -> dict[str, Any]:
    return {
        "observables": {
            name: {attr: _copy(getattr(observable, attr)) for attr in _OBSERVABLE_ATTRIBUTES}
            for name, observable in env._observables.items()
        },
        "obs_cache": {name: _copy(value) for name, value in env._obs_cache.items()},
    }


def _set_observables_state(env: Any, state: dict[str, Any]) -> None:
    for name, observable in env._observables.items():
        for attr, value in state["observables"][name].items():
            setattr(observable, attr, _copy(value))
    env._obs_cache = {name: _copy(value) for name, value in state["obs_cache"].items()}


def take_snapshot(env: Any) -> dict[str, Any]:
    """Everything needed to continue ``env`` (a robosuite environment) bit-identically."""
    return {
        "format": SNAPSHOT_FORMAT,
        "model": model_fingerprint(env.sim),
        "physics": _get_physics(env.sim),
        "timestep": int(env.timestep),
        "cur_time": float(env.cur_time),
        "grippers": [np.array(g.current_action, dtype=np.float64) for g in _grippers(env)],
        "controllers": [_controller_state(c) for c in _controllers(env)],
        **_observables_state(env),
    }


def _check_snapshot(env: Any, snapshot: Any) -> None:
    if not isinstance(snapshot, dict) or snapshot.get("format") != SNAPSHOT_FORMAT:
        raise ValueError(
            f"not a robosuite snapshot (expected a dict with format {SNAPSHOT_FORMAT!r}, "
            f"got {type(snapshot).__name__})"
        )
    required = {"model", "physics", "timestep", "cur_time", "grippers", "controllers"}
    missing = (required | {"observables", "obs_cache"}) - set(snapshot)
    if missing:
        raise ValueError(f"snapshot lacks {sorted(missing)}")
    if set(snapshot["observables"]) != set(env._observables):
        raise ValueError("snapshot's observables differ from this environment's")
    if snapshot["model"] != model_fingerprint(env.sim):
        raise ValueError(
            "snapshot was taken in a simulation with a different model (object sizes, masses "
            "or placements differ): build every environment of a group with the same "
            "arguments and reset it with the group's seed before restoring"
        )
    for what, have, expected in (
        ("grippers", len(snapshot["grippers"]), sum(1 for _ in _grippers(env))),
        ("controllers", len(snapshot["controllers"]), sum(1 for _ in _controllers(env))),
    ):
        if have != expected:
            raise ValueError(f"snapshot has {have} {what}, this environment has {expected}")


def restore_snapshot(env: Any, snapshot: dict[str, Any]) -> dict[str, np.ndarray]:
    """Put ``env`` in the state of ``snapshot`` and return its fresh observation dict.

    Raises ``ValueError`` when the snapshot does not fit this environment; ``env`` is left
    untouched in that case.
    """
    _check_snapshot(env, snapshot)
    _set_physics(env.sim, np.asarray(snapshot["physics"], dtype=np.float64))
    env.sim.forward()
    env.timestep = int(snapshot["timestep"])
    env.cur_time = float(snapshot["cur_time"])
    env.done = False
    for gripper, action in zip(_grippers(env), snapshot["grippers"], strict=True):
        gripper.current_action = np.array(action, dtype=np.float64)
    for controller, state in zip(_controllers(env), snapshot["controllers"], strict=True):
        controller.reset_goal()
        _set_controller_state(controller, state)
        controller.new_update = True
        controller.update(force=True)
    _set_observables_state(env, snapshot)
    return env._get_observations()
