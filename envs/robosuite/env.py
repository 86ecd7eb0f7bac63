"""robosuite tasks as gymnasium environments with low-dimensional state and exact snapshots."""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from wmrl_env.envs.robosuite import snapshot as snapshots
from wmrl_env.envs.robosuite.actions import checked_action
from wmrl_env.envs.robosuite.fast_control import FastControl, unsupported_reason
from wmrl_env.envs.robosuite.observations import flatten_state, state_keys
from wmrl_env.utils.imports import require

__all__ = ["RobosuiteEnv"]


class RobosuiteEnv(gym.Env[np.ndarray, np.ndarray]):
    """A robosuite manipulation task (Lift, Stack, Door, ...) behind the gymnasium API.

    Observations are the flat low-dimensional state (robot proprioception then object state,
    float32); actions are the robot's controller commands in ``[-1, 1]`` (OSC pose + gripper
    for the default Panda). Runs headless; ``render_mode="rgb_array"`` renders upright frames
    from ``render_camera`` with an offscreen renderer (set ``MUJOCO_GL=egl`` or ``osmesa``).

    ``reset(seed=s)`` reproduces the same start for the same ``s`` (robosuite's own seeding
    does not); :meth:`get_snapshot` / :meth:`restore_snapshot` give bit-identical starts to
    every member of a group.

    Episodes end with ``truncated=True`` after ``horizon`` steps. ``info["success"]`` reports
    the task's success check every step; with ``terminate_on_success=True`` a success also
    ends the episode (``terminated=True``).

    Args:
        task: a robosuite environment name (``"Lift"``, ``"Stack"``, ``"Door"``, ...).
        robots: robot name(s) passed to ``robosuite.make``.
        horizon: steps per episode.
        reward_shaping: robosuite's dense shaped reward instead of the sparse success reward.
        terminate_on_success: end the episode when the task succeeds.
        control_freq: policy steps per simulated second.
        render_mode: ``None`` or ``"rgb_array"``.
        render_size: ``(height, width)`` of rendered frames.
        render_camera: camera used by :meth:`render`.
        model_seed: seeds what robosuite randomises when it builds the model (object sizes).
            Environments built with the same arguments start with the same model. Some tasks
            also write the model at every reset (Door places the door there), so a snapshot
            restores only into an env whose last reset drew the same model (built with the
            same arguments and reset with the same seed, as a group's members are); any other
            restore raises ``ValueError``.
        fast_control: play the controller's sub-steps with :class:`~.fast_control.FastControl`
            (the same floats as robosuite's own path at about half the CPU): ``None`` where it
            covers the set-up (the default Panda's OSC; see :func:`.unsupported_reason`),
            ``True`` to require it (``ValueError`` with the reason where not covered),
            ``False`` for robosuite's own path. :attr:`fast_control` says which runs.
        **robosuite_kwargs: passed on to ``robosuite.make``.

    Example (needs robosuite)::

        env = RobosuiteEnv("Lift", horizon=100)
        obs, info = env.reset(seed=0)
        start = env.get_snapshot()
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        obs, info = env.restore_snapshot(start)    # back to the start, bit for bit
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array"], "render_fps": 20}

    def __init__(
        self,
        task: str = "Lift",
        robots: str | list[str] = "Panda",
        horizon: int = 200,
        reward_shaping: bool = True,
        terminate_on_success: bool = False,
        control_freq: int = 20,
        render_mode: str | None = None,
        render_size: tuple[int, int] = (128, 128),
        render_camera: str = "frontview",
        model_seed: int = 0,
        fast_control: bool | None = None,
        **robosuite_kwargs: Any,
    ) -> None:
        if not isinstance(horizon, int) or horizon < 1:
            raise ValueError(f"horizon must be a positive int, got {horizon!r}")
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        if fast_control not in (None, True, False):
            raise ValueError(f"fast_control must be None, True or False, got {fast_control!r}")
        robosuite = require("robosuite", "RobosuiteEnv")
        self.task = task
        self.horizon = horizon
        self.terminate_on_success = terminate_on_success
        self.render_mode = render_mode
        self.render_size = tuple(render_size)
        self.render_camera = render_camera
        self.metadata = {**self.metadata, "render_fps": control_freq}
        self._env = robosuite.make(
            task,
            robots=robots,
            has_renderer=False,
            has_offscreen_renderer=render_mode == "rgb_array",
            use_camera_obs=False,
            use_object_obs=True,
            horizon=horizon,
            ignore_done=False,
            hard_reset=False,
            reward_shaping=reward_shaping,
            control_freq=control_freq,
            seed=model_seed,
            **robosuite_kwargs,
        )
        self.fast_control = self._use_fast_control(fast_control)
        first = self._env.reset()
        self._keys = state_keys(first)
        size = flatten_state(first, self._keys).shape[0]
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (size,), np.float32)
        low, high = self._env.action_spec
        self.action_space = gym.spaces.Box(
            low.astype(np.float32), high.astype(np.float32), dtype=np.float32
        )
        self._episode_over = True

    def _use_fast_control(self, wanted: bool | None) -> bool:
        reason = None if wanted is False else unsupported_reason(self._env)
        if wanted and reason is not None:
            self._env.close()
            raise ValueError(
                f"fast_control=True, but FastControl does not cover this env: {reason}"
            )
        if wanted is False or reason is not None:
            return False
        FastControl(self._env).install()
        return True

    @property
    def sim_env(self) -> Any:
        """The underlying robosuite environment (read it, do not step it directly)."""
        return self._env

    def _observe(self, raw: dict[str, np.ndarray]) -> np.ndarray:
        return flatten_state(raw, self._keys)

    def _info(self) -> dict[str, Any]:
        return {"success": bool(self._env._check_success()), "timestep": int(self._env.timestep)}

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        # robosuite draws object placements and joint noise from ``env.rng``, which its
        # placement samplers hold by reference: re-seed that generator in place.
        seeded = np.random.default_rng(self.np_random.integers(2**63))
        self._env.rng.bit_generator.state = seeded.bit_generator.state
        raw = self._env.reset()
        self._episode_over = False
        return self._observe(raw), self._info()

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        action = checked_action(action, self.action_space, self._episode_over)
        raw, reward, done, _ = self._env.step(action)
        info = self._info()
        terminated = self.terminate_on_success and info["success"]
        truncated = bool(done) and not terminated
        self._episode_over = terminated or truncated
        return self._observe(raw), float(reward), terminated, truncated, info

    def get_snapshot(self) -> dict[str, Any]:
        """The exact current state, as plain data (see :mod:`.snapshot`)."""
        return {**snapshots.take_snapshot(self._env), "task": self.task}

    def restore_snapshot(self, snapshot: dict[str, Any]) -> tuple[np.ndarray, dict[str, Any]]:
        """Continue from ``snapshot``: taken from an env built with the same arguments whose
        model is the same now (for Door: reset with the same seed; see ``model_seed``).
        Raises ``ValueError`` for a snapshot that does not fit, leaving the env unchanged."""
        if isinstance(snapshot, dict) and snapshot.get("task", self.task) != self.task:
            raise ValueError(f"snapshot of task {snapshot['task']!r} given to a {self.task} env")
        raw = snapshots.restore_snapshot(self._env, snapshot)
        self._episode_over = int(snapshot["timestep"]) >= self.horizon
        return self._observe(raw), self._info()

    def render(self) -> np.ndarray | None:
        if self.render_mode is None:
            return None
        height, width = self.render_size
        frame = self._env.sim.render(camera_name=self.render_camera, height=height, width=width)
        return np.ascontiguousarray(frame[::-1])

    def close(self) -> None:
        env, self._env = getattr(self, "_env", None), None
        if env is not None:
            env.close()
