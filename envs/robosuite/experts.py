"""Scripted experts for robosuite Lift and Stack, from the flat state the env observes.

An expert is a small state machine ``expert(observation) -> action``: it reads the gripper
and object positions from :class:`~wmrl_env.envs.robosuite.RobosuiteEnv`'s observation
(``robot0_proprio-state`` then ``object-state``, see :data:`LAYOUTS`), moves the gripper
site towards the current phase's target with a proportional command for the default Panda
OSC-pose controller (``action[:3]`` is a position delta, 1 = 5 cm; ``action[3:6]`` rotation,
kept at 0; ``action[6]`` the gripper, -1 open, +1 closed) and switches phase when the target
is reached. Call :meth:`reset` at every episode start.

* **Lift**: approach above the cube, descend, close, lift. If the cube slips out of the
  grasp, it starts again from the approach.
* **Stack**: pick cube A as in Lift, carry it above cube B, lower it onto B, open, retreat.

``noise`` and ``perturb_prob`` make noisy demonstrators: Gaussian noise on the position
commands (the orientation is left alone), and now and then a random push held for
``perturb_steps`` steps, from which the closed-loop expert recovers (or not: failed episodes
are part of the data).

Example:
    >>> import numpy as np
    >>> expert = LiftExpert()
    >>> obs = np.zeros(LAYOUTS["Lift"].size, np.float32)
    >>> obs[LAYOUTS["Lift"].objects["cube"]] = [0.1, 0.0, 0.82]   # cube 10 cm ahead of the grip
    >>> action = expert(obs)
    >>> action.shape, expert.phase, float(action[6])
    ((7,), 'approach', -1.0)
    >>> bool(action[0] > 0)   # moves towards the cube
    True
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["LAYOUTS", "LiftExpert", "ScriptedExpert", "StackExpert", "StateLayout", "make_expert"]

_OPEN, _CLOSED = -1.0, 1.0
_UP = np.array([0.0, 0.0, 1.0])


@dataclass(frozen=True)
class StateLayout:
    """Where a task's positions sit in the flat observation (checked by the tests)."""

    size: int
    eef_pos: slice = field(default_factory=lambda: slice(35, 38))
    gripper_qpos: slice = field(default_factory=lambda: slice(46, 48))
    objects: dict[str, slice] = field(default_factory=dict)


#: observation layout of each task with the default Panda (``robot0_eef_pos`` is the grip site)
LAYOUTS: dict[str, StateLayout] = {
    "Lift": StateLayout(size=60, objects={"cube": slice(50, 53)}),
    "Stack": StateLayout(size=73, objects={"cubeA": slice(50, 53), "cubeB": slice(57, 60)}),
}


class ScriptedExpert:
    """Shared machinery: phase bookkeeping, the proportional move, noise and perturbations.

    Args:
        noise: standard deviation of Gaussian noise added to the position commands.
        perturb_prob: chance per step of starting a random push (a constant random arm
            command held for ``perturb_steps`` steps).
        perturb_steps: length of a push.
        gain: command per metre of position error (10 -> full command at 10 cm).
        seed: seeds the noise (:meth:`reset` with a seed re-seeds it).
    """

    task = ""

    def __init__(
        self,
        noise: float = 0.0,
        perturb_prob: float = 0.0,
        perturb_steps: int = 5,
        gain: float = 10.0,
        seed: int | None = 0,
    ) -> None:
        if noise < 0 or not np.isfinite(noise):
            raise ValueError(f"noise must be a finite std >= 0, got {noise!r}")
        if not 0.0 <= perturb_prob <= 1.0:
            raise ValueError(f"perturb_prob must be in [0, 1], got {perturb_prob!r}")
        if perturb_steps < 1:
            raise ValueError(f"perturb_steps must be >= 1, got {perturb_steps!r}")
        self.layout = LAYOUTS[self.task]
        self.noise, self.perturb_prob, self.perturb_steps = noise, perturb_prob, perturb_steps
        self.gain = gain
        self.rng = np.random.default_rng(seed)
        self.reset()

    def reset(self, seed: int | None = None) -> None:
        """Start a new episode (and re-seed the noise when ``seed`` is given)."""
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.phase = "approach"
        self.phase_steps = 0
        self._push = np.zeros(3)
        self._push_left = 0

    def _set_phase(self, phase: str) -> None:
        self.phase, self.phase_steps = phase, 0

    def _move(self, error: np.ndarray | list[float], gripper: float) -> np.ndarray:
        action = np.zeros(7)
        action[:3] = np.clip(self.gain * np.asarray(error), -1.0, 1.0)
        action[6] = gripper
        return action

    def _read(self, observation: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        state = np.asarray(observation, dtype=np.float64)
        if state.shape != (self.layout.size,):
            raise ValueError(
                f"{type(self).__name__} expects one {self.task} observation of shape "
                f"({self.layout.size},), got {state.shape}"
            )
        if not np.isfinite(state).all():
            raise ValueError("observation contains NaN or inf")
        objects = {name: state[where] for name, where in self.layout.objects.items()}
        return state[self.layout.eef_pos], objects

    def _plan(self, eef: np.ndarray, objects: dict[str, np.ndarray]) -> np.ndarray:
        raise NotImplementedError

    def __call__(self, observation: np.ndarray) -> np.ndarray:
        eef, objects = self._read(observation)
        action = self._plan(eef, objects)
        self.phase_steps += 1
        if self._push_left == 0 and self.rng.random() < self.perturb_prob:
            self._push, self._push_left = self.rng.uniform(-1, 1, 3), self.perturb_steps
        if self._push_left > 0:
            action[:3] = self._push
            self._push_left -= 1
        if self.noise > 0:
            action[:3] += self.rng.normal(0.0, self.noise, 3)
        return np.clip(action, -1.0, 1.0).astype(np.float32)


class LiftExpert(ScriptedExpert):
    """Lift: approach above the cube, descend, close the gripper, lift (re-grasp on a slip)."""

    task = "Lift"
    hover = 0.08  # approach height above the cube's centre (m)
    grasp_steps = 8  # steps the gripper takes to close
    lift_height = 0.15  # how far the cube is lifted (success needs 0.04)

    def _pick(self, eef: np.ndarray, cube: np.ndarray) -> np.ndarray | None:
        """The action of the pick phases, or ``None`` once the cube is held and lifted."""
        to_cube = cube - eef
        if self.phase == "approach":
            error = to_cube + self.hover * _UP
            if np.linalg.norm(error[:2]) < 0.01 and abs(error[2]) < 0.02:
                self._set_phase("descend")
            return self._move(error, _OPEN)
        if self.phase == "descend":
            if np.linalg.norm(to_cube[:2]) > 0.02:  # pushed off: hover again
                self._set_phase("approach")
            elif np.linalg.norm(to_cube) < 0.01 or (
                self.phase_steps > 25 and np.linalg.norm(to_cube) < 0.02
            ):  # there, or as close as the fingers let it get
                self._set_phase("grasp")
            return self._move(to_cube, _OPEN)
        if self.phase == "grasp":
            if self.phase_steps >= self.grasp_steps:
                self._set_phase("lift")
                self.lift_from = cube[2]
            return self._move(to_cube, _CLOSED)
        if np.linalg.norm(to_cube) > 0.03:  # the cube slipped out: start again
            self._set_phase("approach")
            return self._move(to_cube + self.hover * _UP, _OPEN)
        return None

    def _plan(self, eef: np.ndarray, objects: dict[str, np.ndarray]) -> np.ndarray:
        cube = objects["cube"]
        action = self._pick(eef, cube)
        if action is not None:
            return action
        return self._move([0.0, 0.0, self.lift_from + self.lift_height - cube[2]], _CLOSED)


class StackExpert(LiftExpert):
    """Stack: pick cube A as in Lift, carry it above cube B, lower it onto B, release, retreat."""

    task = "Stack"
    lift_height = 0.10
    carry_clearance = 0.03  # gap between A's bottom and B's top while carrying (m)
    stack_gap = 0.047  # centre-to-centre height of A resting on B (half sizes 0.02 + 0.025)
    release_steps = 6

    def _plan(self, eef: np.ndarray, objects: dict[str, np.ndarray]) -> np.ndarray:
        cube_a, cube_b = objects["cubeA"], objects["cubeB"]
        if self.phase in ("release", "retreat"):
            if self.phase == "release" and self.phase_steps >= self.release_steps:
                self._set_phase("retreat")
            lift = 0.0 if self.phase == "release" else cube_b[2] + 0.15 - eef[2]
            return self._move([0.0, 0.0, lift], _OPEN)
        action = self._pick(eef, cube_a)
        if action is not None:
            return action
        if self.phase == "lift" and cube_a[2] < self.lift_from + self.lift_height - 0.02:
            return self._move([0.0, 0.0, self.lift_from + self.lift_height - cube_a[2]], _CLOSED)
        above = cube_b + (self.stack_gap + self.carry_clearance) * _UP - cube_a
        if self.phase == "lift":
            self._set_phase("carry")
        if self.phase == "carry":
            if np.linalg.norm(above[:2]) < 0.008 and abs(above[2]) < 0.015:
                self._set_phase("lower")
            return self._move(above, _CLOSED)
        onto = cube_b + (self.stack_gap + 0.003) * _UP - cube_a
        if np.linalg.norm(onto[:2]) > 0.015:  # drifted sideways: carry again
            self._set_phase("carry")
        elif abs(onto[2]) < 0.006:
            self._set_phase("release")
        return self._move(onto, _CLOSED)


_EXPERTS: dict[str, type[ScriptedExpert]] = {"Lift": LiftExpert, "Stack": StackExpert}


def make_expert(task: str, **kwargs: float | int | None) -> ScriptedExpert:
    """The scripted expert of ``task`` (``"Lift"`` or ``"Stack"``, or ``"wmrl/Lift-v0"``).

    >>> make_expert("wmrl/Stack-v0", noise=0.1).task
    'Stack'
    """
    name = task.removeprefix("wmrl/").removesuffix("-v0")
    if name not in _EXPERTS:
        raise ValueError(f"no scripted expert for {task!r}; experts exist for {sorted(_EXPERTS)}")
    return _EXPERTS[name](**kwargs)
