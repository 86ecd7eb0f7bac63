"""``MLTaskMultiTurnEnv``: write a program, read what the sandbox printed, revise, for K turns.

One episode is one ML task. ``reset`` gives the task description (the task, its metric, the
data's columns and sizes). Each ``step(program)`` executes the program for real and the next
observation is that run's report (:func:`~wmrl_env.envs.ml_tasks.turns.render_report`): the
status, the error class and the last lines of the traceback, the validation score, the
seconds. The episode ends after ``max_turns`` programs, or earlier when the agent sends
:data:`STOP` (which runs nothing). The reward is configurable:

* ``"final"``: the last program's score, given at the end (0 before);
* ``"best"``: the best score of the episode, given at the end;
* ``"improvement"``: each turn, how much the best score so far rose (the returns sum to
  ``"best"``'s reward).

A failed run scores ``failure_reward``. The score an agent is rewarded with is the task's
validation score; a task with a private test reports the final program's private score in the
final step's ``info["private_score"]`` only (``None`` where the task has none or the final
program failed), never in a reward or an observation: the generated tasks
``hr_<family>_s<seed>`` and the real-data tasks ``rd_<name>`` have one
(:mod:`~wmrl_env.envs.ml_tasks.private_test`).

Example:
    >>> env = MLTaskMultiTurnEnv(tasks=["iris"], executor="replay", max_turns=2)
    >>> description, info = env.reset(seed=0)
    >>> observation, reward, terminated, _, info = env.step(ProgramSpec("log1p", "svm", "mid"))
    >>> print(observation.splitlines()[0]), reward, terminated
    Task iris, turn 1 of 2
    (None, 0.0, False)
    >>> observation, reward, terminated, _, info = env.step(STOP)
    >>> terminated, info["turns"], round(reward, 3) == round(info["best_score"], 3)
    (True, 1, True)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

import gymnasium as gym
from gymnasium import spaces

from wmrl_env.executors.base import ExecResult, Executor
from wmrl_env.sandboxes.job import Job

from .description import DESCRIPTION_CHARSET
from .env import MAX_DESCRIPTION_CHARS, MAX_PROGRAM_CHARS, PROGRAM_CHARSET, MLTaskEnv
from .private_test import PrivateTestTask
from .programs import ProgramSpec  # noqa: F401  (the docstring's example)
from .turns import TurnReport, render_report, report_from_result

__all__ = ["REWARD_MODES", "STOP", "MLTaskMultiTurnEnv"]

STOP = "STOP"
REWARD_MODES: tuple[str, ...] = ("final", "best", "improvement")
RewardMode = Literal["final", "best", "improvement"]


class MLTaskMultiTurnEnv(gym.Env[str, Any]):
    """Revise a solution program over up to ``max_turns`` real executions.

    Args:
        tasks, executor, failure_reward, timeout_s, data_root: as for
            :class:`~wmrl_env.envs.ml_tasks.env.MLTaskEnv` (``executor="replay"`` answers
            structured programs from the committed execution table).
        max_turns: how many programs an episode may execute (at least 1).
        reward: ``"final"``, ``"best"`` or ``"improvement"`` (module docstring).
        render_mode: ``None`` or ``"ansi"``.

    The action is a program (text) or a structured program; the string :data:`STOP` ends the
    episode without running anything. ``info`` after a step holds ``turn``, ``status``,
    ``error_class``, ``score`` (``None`` on failure), ``exec_seconds``, ``program_id`` and
    ``best_score``; at the end also ``turns`` (programs executed), ``final_score``,
    ``stopped`` and ``private_score``.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"]}

    def __init__(
        self,
        tasks: str | Sequence[str] = "train",
        executor: Executor[Job] | Literal["local", "replay"] = "local",
        *,
        max_turns: int = 4,
        reward: RewardMode = "best",
        failure_reward: float = 0.0,
        timeout_s: float | None = None,
        data_root: str | None = None,
        render_mode: str | None = None,
    ) -> None:
        if not isinstance(max_turns, int) or max_turns < 1:
            raise ValueError(f"max_turns must be an integer >= 1, got {max_turns!r}")
        if reward not in REWARD_MODES:
            raise ValueError(f"reward must be one of {REWARD_MODES}, got {reward!r}")
        self._single = MLTaskEnv(
            tasks,
            executor,
            failure_reward=failure_reward,
            timeout_s=timeout_s,
            data_root=data_root,
            render_mode=render_mode,
        )
        self.task_ids = self._single.task_ids
        self.max_turns = max_turns
        self.reward_mode = reward
        self.failure_reward = float(failure_reward)
        self.render_mode = render_mode
        self.observation_space = spaces.Text(
            max_length=MAX_DESCRIPTION_CHARS, min_length=1, charset=DESCRIPTION_CHARSET
        )
        self.action_space = spaces.Text(
            max_length=MAX_PROGRAM_CHARS, min_length=1, charset=PROGRAM_CHARSET
        )
        self._task_id: str | None = None
        self._reports: list[TurnReport] = []
        self._results: list[ExecResult] = []
        self._done = False

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        description, info = self._single.reset(seed=seed, options=options)
        self._task_id = info["task_id"]
        self._reports, self._results, self._done = [], [], False
        return description, {**info, "turn": 0, "max_turns": self.max_turns}

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._task_id is None:
            raise RuntimeError("call reset() before step()")
        if self._done:
            raise RuntimeError("the episode is over: call reset()")
        if isinstance(action, str) and action == STOP:
            return self._finish(stopped=True)
        best_before = self.best_score
        job = self._single.make_job(action)
        result = self._single.executor.run([job])[0]
        ran = [r.score for r in self._reports if r.score is not None]
        report = report_from_result(
            result, self._task_id, len(self._reports) + 1, self.max_turns, max(ran, default=None)
        )
        self._reports.append(report)
        self._results.append(result)
        if len(self._reports) == self.max_turns:
            return self._finish(stopped=False, best_before=best_before)
        reward = self.best_score - best_before if self.reward_mode == "improvement" else 0.0
        return render_report(report), float(reward), False, False, self._turn_info(job)

    @property
    def best_score(self) -> float:
        """The best score of this episode's runs so far (``failure_reward`` before any)."""
        scores = [self._score(report) for report in self._reports]
        return max(scores, default=self.failure_reward)

    @property
    def reports(self) -> tuple[TurnReport, ...]:
        """This episode's turn reports, in order."""
        return tuple(self._reports)

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        if not self._reports:
            return "(no turn yet)"
        return "\n\n".join(render_report(report) for report in self._reports)

    def close(self) -> None:
        self._single.close()
        super().close()

    # ---------------------------------------------------------------------------- helpers

    def _score(self, report: TurnReport) -> float:
        return self.failure_reward if report.score is None else report.score

    def _finish(
        self, *, stopped: bool, best_before: float | None = None
    ) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self._done = True
        final = self._score(self._reports[-1]) if self._reports else self.failure_reward
        if self.reward_mode == "final":
            reward = final
        elif self.reward_mode == "best":
            reward = self.best_score
        else:  # improvement: what this last turn added (0 for a stop)
            reward = 0.0 if best_before is None else self.best_score - best_before
        observation = (
            render_report(self._reports[-1])
            if self._reports and not stopped
            else f"Episode over after {len(self._reports)} of {self.max_turns} turns"
        )
        info = self._turn_info(None) | {
            "turns": len(self._reports),
            "final_score": final,
            "stopped": stopped,
            "private_score": self._private_score(),
        }
        return observation, float(reward), True, False, info

    def _private_score(self) -> float | None:
        """The final program's private-test score: recorded by the executor, or computed
        from its outputs on a task with a private test (normalised like the validation
        score: the trivial baseline 0, the metric's ideal 1)."""
        if not self._results:
            return None
        result = self._results[-1]
        value = result.metadata.get("private_score")
        task = self._single.task
        if value is None and isinstance(task, PrivateTestTask) and result.ok:
            value = task.private_score(result.outputs, normalise=True)
        if value is None or not math.isfinite(float(value)):
            return None
        return float(value)

    def _turn_info(self, job: Job | None) -> dict[str, Any]:
        last = self._reports[-1] if self._reports else None
        program_id = None if job is None else job.tags.get("program_id")
        return {
            "task_id": self._task_id,
            "turn": len(self._reports),
            "status": None if last is None else last.status,
            "error_class": None if last is None else last.error_class,
            "score": None if last is None else last.score,
            "exec_seconds": 0.0 if last is None else last.seconds,
            "program_id": program_id,
            "best_score": self.best_score,
        }
