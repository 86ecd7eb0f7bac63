"""``MLTaskEnv``: one episode = one ML task; one step = one solution program, executed for real.

The observation is the task description (text). The action is a program (text) or a choice
of the structured program space (:mod:`~wmrl_env.envs.ml_tasks.programs`); the program runs
through an :class:`~wmrl_env.executors.base.Executor` (the local process sandbox by
default, or a :class:`~wmrl_env.sandboxes.replay.ReplayExecutor` answering from the committed
execution table), the host scores its ``predictions.csv`` against the hidden labels, and the
reward is the normalised score in [0, 1]. A failed execution (crash, timeout, invalid output)
gets ``failure_reward`` (0 by default) and its status in ``info``. The episode ends after
that one step (``terminated=True``).

Actions: with ``action_mode="text"`` the action space is ``spaces.Text`` (a program); with
``action_mode="structured"`` it is ``MultiDiscrete([4, 6, 3])``. In both modes ``step``
accepts either kind: a ``str`` is run as program text, anything else (three indices, a
mapping, a :class:`ProgramSpec` or its id such as ``"standardize-forest-mid"`` passed as a
``ProgramSpec``) is rendered to a program for the current task first.

Example:
    >>> env = MLTaskEnv(tasks=["iris"], executor="replay", action_mode="structured")
    >>> description, info = env.reset(seed=0)
    >>> info["task_id"], description.splitlines()[0]
    ('iris', "Task iris: Fisher's iris flowers (scikit-learn bundled data)")
    >>> _, reward, terminated, truncated, info = env.step([1, 0, 1])  # standardize-linear-mid
    >>> info["status"], info["program_id"], 0.0 <= reward <= 1.0, terminated, truncated
    ('ok', 'standardize-linear-mid', True, True, False)
    >>> env.close()
"""

from __future__ import annotations

import functools
import math
import string
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

import gymnasium as gym
from gymnasium import spaces

from wmrl_env.executors.base import ExecResult, Executor
from wmrl_env.sandboxes.job import Job
from wmrl_env.utils.hashing import artifact_hash

from .description import DESCRIPTION_CHARSET
from .pool_tasks import is_private_test_id
from .private_test import PrivateTestTask
from .programs import ProgramSpec, program_space, render_program
from .registry import get_task, task_ids
from .tasks import MLTask

__all__ = ["MAX_DESCRIPTION_CHARS", "MAX_PROGRAM_CHARS", "MLTaskEnv", "resolve_task"]

MAX_DESCRIPTION_CHARS = 4096
MAX_PROGRAM_CHARS = 32768
PROGRAM_CHARSET = string.printable
TAIL_CHARS = 2000  # of stdout / stderr in info


class MLTaskEnv(gym.Env[str, Any]):
    """Write a program that solves an ML task; the reward is its real, normalised score.

    Args:
        tasks: ``"train"``, ``"heldout"``, ``"all"`` or a sequence of task ids to draw from
            (ids of the suite, or tasks with a private test: generated ``hr_<family>_s<seed>``
            and real-data ``rd_<name>``, see
            :func:`~wmrl_env.envs.ml_tasks.pool_tasks.private_test_task`).
        executor: ``"local"`` (default: the local process sandbox, created on first use),
            ``"replay"`` (answers from the committed execution table; structured programs
            only), or any :class:`~wmrl_env.executors.base.Executor` (not closed by the env).
        action_mode: ``"text"`` or ``"structured"``: which action space is declared; ``step``
            accepts both kinds of action either way.
        failure_reward: reward of an execution that did not produce a score.
        timeout_s: per-program time limit; default: the task's own (stated in its description).
        data_root: where task data is exported (default ``$WMRL_DATA_DIR`` or the user cache).
        render_mode: ``None`` or ``"ansi"``.

    ``reset(seed=..., options={"task_id": ...})`` picks that task, or draws one of ``tasks``
    uniformly with the env's seeded generator. ``info`` after a step holds ``task_id``,
    ``program_id`` (structured actions, else ``None``), ``program_hash``, ``status``,
    ``score`` (normalised, ``None`` on failure), ``raw_metric`` (the task metric, ``None`` on
    failure), ``exec_seconds``, ``message``, ``stdout_tail`` and ``stderr_tail``.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"]}

    def __init__(
        self,
        tasks: str | Sequence[str] = "train",
        executor: Executor[Job] | Literal["local", "replay"] = "local",
        *,
        action_mode: Literal["text", "structured"] = "text",
        failure_reward: float = 0.0,
        timeout_s: float | None = None,
        data_root: str | None = None,
        render_mode: str | None = None,
    ) -> None:
        self.task_ids = task_ids(tasks) if isinstance(tasks, str) else tuple(tasks)
        if not self.task_ids:
            raise ValueError("tasks must name at least one task")
        for task_id in self.task_ids:
            resolve_task(task_id)  # fail now, with the list of known tasks, on a bad id
        if action_mode not in ("text", "structured"):
            raise ValueError(f"action_mode must be 'text' or 'structured', got {action_mode!r}")
        if isinstance(executor, str) and executor not in ("local", "replay"):
            raise ValueError(f"executor must be 'local', 'replay' or an Executor, got {executor!r}")
        if not isinstance(executor, str) and not callable(getattr(executor, "run", None)):
            raise TypeError(f"executor must be an Executor, got {type(executor).__name__}")
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        if not math.isfinite(failure_reward):
            raise ValueError(f"failure_reward must be finite, got {failure_reward}")
        self._executor_choice = executor
        self._executor: Executor[Job] | None = None if isinstance(executor, str) else executor
        self.action_mode = action_mode
        self.failure_reward = float(failure_reward)
        self.timeout_s = timeout_s
        self.data_root = data_root
        self.render_mode = render_mode
        self.observation_space = spaces.Text(
            max_length=MAX_DESCRIPTION_CHARS, min_length=1, charset=DESCRIPTION_CHARSET
        )
        self.action_space: spaces.Space[Any] = (
            spaces.Text(max_length=MAX_PROGRAM_CHARS, min_length=1, charset=PROGRAM_CHARSET)
            if action_mode == "text"
            else program_space()
        )
        self._task: MLTask | PrivateTestTask | None = None
        self._done = False
        self._last: tuple[str, dict[str, Any]] | None = None

    # ---------------------------------------------------------------------------- episodes

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        task_id = (options or {}).get("task_id")
        if task_id is None:
            task_id = self.task_ids[int(self.np_random.integers(len(self.task_ids)))]
        elif task_id not in self.task_ids:
            raise ValueError(f"task_id {task_id!r} is not one of this env's tasks {self.task_ids}")
        self._task = resolve_task(task_id)
        self._done = False
        self._last = None
        return self._task.description, self._task_info()

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._task is None:
            raise RuntimeError("call reset() before step()")
        if self._done:
            raise RuntimeError("the episode is over (one step per episode): call reset()")
        job, spec = self._job(action, self._task)
        result = self._get_executor().run([job])[0]
        info = self._step_info(job, spec, result, self._task)
        reward = result.score if result.ok else self.failure_reward
        self._done = True
        self._last = (job.program, info)
        return self._task.description, float(reward), True, False, info

    def make_job(self, action: Any, task_id: str | None = None) -> Job:
        """The job that ``step(action)`` would run, for the current (or the given) task.

        For callers that batch executions themselves (e.g. a world-model wrapper that runs
        only anchor groups): submit it to an executor; the result's score is the reward.
        """
        if task_id is None and self._task is None:
            raise RuntimeError("call reset() first or pass task_id")
        return self._job(action, self._task if task_id is None else resolve_task(task_id))[0]

    @property
    def task(self) -> MLTask | PrivateTestTask | None:
        """The current episode's task (``None`` before ``reset``)."""
        return self._task

    @property
    def executor(self) -> Executor[Job]:
        """The executor that runs this env's programs (created on first use)."""
        return self._get_executor()

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        if self._task is None:
            return "(no task: call reset())"
        if self._last is None:
            return self._task.description
        program, info = self._last
        return f"{self._task.description}\n--- program ---\n{program}\n--- result ---\n{info}"

    def close(self) -> None:
        if isinstance(self._executor_choice, str) and self._executor is not None:
            self._executor.close()
            self._executor = None
        super().close()

    # ---------------------------------------------------------------------------- helpers

    def _job(self, action: Any, task: MLTask | PrivateTestTask) -> tuple[Job, ProgramSpec | None]:
        if isinstance(action, str):
            program, spec = action, None
        else:
            spec = ProgramSpec.from_action(action)
            program = render_program(spec, task.kind)
        tags = {"program_id": spec.id} if spec is not None else {}
        job = task.make_job(program, data_root=self.data_root, timeout_s=self.timeout_s, tags=tags)
        return job, spec

    def _get_executor(self) -> Executor[Job]:
        if self._executor is None:
            if self._executor_choice == "replay":
                from .tables import load_table

                self._executor = load_table().replay_executor()
            else:
                from .sandbox import default_sandbox

                self._executor = default_sandbox()
        return self._executor

    def _task_info(self) -> dict[str, Any]:
        assert self._task is not None
        return {"task_id": self._task.task_id, "kind": self._task.kind, "metric": self._task.metric}

    def _step_info(
        self, job: Job, spec: ProgramSpec | None, result: ExecResult, task: MLTask | PrivateTestTask
    ) -> dict[str, Any]:
        return {
            "task_id": task.task_id,
            "program_id": None if spec is None else spec.id,
            "program_hash": artifact_hash(job.program),
            "status": result.status.value,
            "score": result.score if result.ok else None,
            "raw_metric": _raw_metric(result, task),
            "exec_seconds": float(result.exec_seconds),
            "message": result.message,
            "stdout_tail": result.stdout[-TAIL_CHARS:],
            "stderr_tail": result.stderr[-TAIL_CHARS:],
        }


def resolve_task(task_id: str) -> MLTask | PrivateTestTask:
    """The suite's task with this id, or a task with a private test (``hr_*``, ``rd_*``)."""
    if is_private_test_id(task_id):
        return _private_test_task(task_id)
    return get_task(task_id)


@functools.lru_cache(maxsize=64)
def _private_test_task(task_id: str) -> PrivateTestTask:
    from .pool_tasks import private_test_task

    return private_test_task(task_id)


def _raw_metric(result: ExecResult, task: MLTask | PrivateTestTask) -> float | None:
    """The task metric of a successful result: recorded (replay) or recomputed from outputs
    (a task with a private test: on its validation rows)."""
    if not result.ok:
        return None
    recorded = result.metadata.get("raw_metric")
    if recorded not in (None, ""):
        return float(recorded)
    if isinstance(task, PrivateTestTask):
        return task.validation_scorer(normalise=False)(result.outputs)
    return task.evaluate(result.outputs)
