"""``TurnSimulator``: a multi-turn ML episode answered by a world model, turn by turn.

A dynamics world model (``predict_step(observations, actions)``) for
:class:`~wmrl_env.envs.ml_tasks.multiturn.MLTaskMultiTurnEnv`: it reads the current
observation (the task description, or the last turn's report), asks an outcome world model
what running the program would report (``predict_outcomes``: status probabilities, the error
class of a crash, the score given ``ok`` and its std) and renders that report in the real
env's format (:func:`~wmrl_env.envs.ml_tasks.turns.render_report`), with the real env's
rewards and episode end. :class:`~wmrl_env.wrappers.WorldModelVectorEnv` drives it for the
groups it does not execute; anchor groups run whole real episodes.

The simulated traceback is the most common real message of the predicted error class in the
execution table (a program-independent template: the world model predicts the class, not the
text). A prediction without a usable score (NaN) returns a NaN reward: the wrapper then counts
the item invalid and executes its group for real.

Example:
    >>> import numpy as np
    >>> from wmrl_env.envs.ml_tasks import ProgramSpec, get_task
    >>> class AlwaysOk:  # a stand-in outcome model: every program runs and scores 0.7
    ...     def predict_outcomes(self, contexts, programs, failure_score=0.0):
    ...         from wmrl_env.world_models.outcomes import OutcomePrediction
    ...         n = len(programs)
    ...         probs = np.tile([1.0, 0, 0, 0, 0], (n, 1))
    ...         return OutcomePrediction.build(probs, np.full(n, 0.7), np.full(n, 0.05),
    ...                                        np.zeros(n, bool), failure_score)
    >>> simulator = TurnSimulator(AlwaysOk(), max_turns=2, reward="best", seed=0)
    >>> start = np.array([get_task("iris").description], dtype=object)
    >>> step = simulator.predict_step(start, np.array([ProgramSpec("none", "knn", "mid")]))
    >>> step.next_observations[0].splitlines()[0:2], step.rewards, step.terminations
    (['Task iris, turn 1 of 2', 'status: ok'], array([0.]), array([False]))
    >>> step = simulator.predict_step(step.next_observations, np.array(["STOP"], dtype=object))
    >>> step.rewards.round(2), step.terminations
    (array([0.7]), array([ True]))
"""

from __future__ import annotations

import collections
import functools
import re
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from wmrl_env.world_models.base import StepPrediction
from wmrl_env.world_models.outcomes import STATUSES, error_class

from .env import resolve_task
from .multiturn import REWARD_MODES, STOP, RewardMode
from .programs import ProgramSpec, render_program
from .turns import TurnReport, parse_report, render_report

__all__ = ["TurnSimulator", "error_messages"]

_DESCRIPTION_HEAD = re.compile(r"Task (\S+):")
_State = tuple[str, int, "float | None", "float | None"]
"""(task id, turns done, last score, best score so far), as an observation shows them."""
# the contract's statuses, as the executor reports them, and the class a non-crash names
_EXECUTOR_STATUS = {
    "ok": ("ok", None),
    "does_not_parse": ("crashed", "SyntaxError"),
    "timeout": ("timeout", "Timeout"),
    "invalid_output": ("invalid_output", "InvalidOutput"),
}


class TurnSimulator:
    """Predict each turn of a multi-turn ML episode from an outcome world model.

    Args:
        world_model: answers ``predict_outcomes(contexts, programs, failure_score=...)`` (the
            package's ML world models do); the context is the task description.
        max_turns, reward, failure_reward: as the real env's (they must match it).
        status: ``"sample"`` (draw the status from its probabilities) or ``"most_likely"``.
        score: ``"mean"`` (the predicted score given ``ok``) or ``"sample"`` (mean + std noise,
            clipped to [0, 1]).
        seed: seeds the draws.
    """

    def __init__(
        self,
        world_model: Any,
        *,
        max_turns: int,
        reward: RewardMode = "best",
        failure_reward: float = 0.0,
        status: Literal["sample", "most_likely"] = "sample",
        score: Literal["mean", "sample"] = "mean",
        seed: int = 0,
    ) -> None:
        if not callable(getattr(world_model, "predict_outcomes", None)):
            raise TypeError(
                "TurnSimulator needs a world model with predict_outcomes(contexts, programs, "
                f"failure_score=...), got {type(world_model).__name__}"
            )
        if reward not in REWARD_MODES:
            raise ValueError(f"reward must be one of {REWARD_MODES}, got {reward!r}")
        if status not in ("sample", "most_likely") or score not in ("mean", "sample"):
            raise ValueError(f"status/score modes not understood: {status!r}, {score!r}")
        if not isinstance(max_turns, int) or max_turns < 1:
            raise ValueError(f"max_turns must be an integer >= 1, got {max_turns!r}")
        self.world_model = world_model
        self.max_turns = max_turns
        self.reward_mode = reward
        self.failure_reward = float(failure_reward)
        self.status_mode = status
        self.score_mode = score
        self._rng = np.random.default_rng(seed)

    def predict_step(self, observations: np.ndarray, actions: np.ndarray) -> StepPrediction:
        """One imagined turn for every (observation, action) pair."""
        n = len(observations)
        states = [_state(str(o)) for o in observations]
        runs = [i for i in range(n) if not _is_stop(actions[i])]
        next_obs = np.empty(n, dtype=object)
        rewards = np.zeros(n)
        std = np.zeros(n)
        terminations = np.zeros(n, dtype=bool)
        for i in sorted(set(range(n)) - set(runs)):  # STOP: the episode ends, nothing runs
            _, turn, last, best = states[i]
            next_obs[i] = f"Episode over after {turn} of {self.max_turns} turns"
            if self.reward_mode != "improvement":
                rewards[i] = self._floor(last if self.reward_mode == "final" else best)
            terminations[i] = True
        if runs:
            reports = self._imagine([states[i] for i in runs], [actions[i] for i in runs])
            for i, (report, report_std) in zip(runs, reports, strict=True):
                best_before = self._floor(states[i][3])
                end = report.turn >= self.max_turns
                if self.reward_mode == "improvement":
                    rewards[i] = self._floor(report.best_score) - best_before
                elif end:
                    chosen = report.score if self.reward_mode == "final" else report.best_score
                    rewards[i] = self._floor(chosen)
                std[i] = report_std if (end or self.reward_mode == "improvement") else 0.0
                next_obs[i] = render_report(report)
                terminations[i] = end
        return StepPrediction(next_obs, rewards, terminations, std=std)

    # ---------------------------------------------------------------------------- helpers

    def _floor(self, score: float | None) -> float:
        """A score, or the failure reward where there is none."""
        return self.failure_reward if score is None else float(score)

    def _imagine(
        self, states: Sequence[_State], actions: Sequence[Any]
    ) -> list[tuple[TurnReport, float]]:
        contexts, programs = [], []
        for (task_id, *_), action in zip(states, actions, strict=True):
            task = resolve_task(task_id)
            contexts.append(task.description)
            programs.append(_program(action, task.kind))
        outcome = self.world_model.predict_outcomes(
            contexts, programs, failure_score=self.failure_reward
        )
        statuses = self._statuses(np.asarray(outcome.status_probs, dtype=np.float64))
        messages = error_messages()
        reports = []
        for k, ((task_id, turn, _, best), status) in enumerate(zip(states, statuses, strict=True)):
            score, score_std = float(outcome.score[k]), float(outcome.std[k])
            if status == "ok":
                if self.score_mode == "sample" and np.isfinite(score_std):
                    score = float(np.clip(score + score_std * self._rng.normal(), 0.0, 1.0))
                shown_status, cls, tail = "ok", None, ""
            else:
                score = None
                shown_status, cls = _EXECUTOR_STATUS.get(status, ("crashed", None))
                if cls is None:
                    cls = self._error_class(outcome, k)
                tail = messages.get(cls) or messages[None]
            new_best = max([v for v in (best, score) if v is not None], default=None)
            report = TurnReport(
                task_id, turn + 1, self.max_turns, shown_status, cls, tail, score, 0.0, new_best
            )
            reports.append((report, score_std if np.isfinite(score_std) else 0.0))
        return reports

    def _statuses(self, probs: np.ndarray) -> list[str]:
        if self.status_mode == "most_likely":
            return [STATUSES[j] for j in probs.argmax(axis=1)]
        cumulative = probs.cumsum(axis=1)
        draws = self._rng.random(len(probs))[:, None]
        return [STATUSES[min(j, len(STATUSES) - 1)] for j in (draws > cumulative).sum(axis=1)]

    def _error_class(self, outcome: Any, k: int) -> str:
        classes = list(outcome.error_classes)
        probs = np.asarray(outcome.error_probs[k], dtype=np.float64)
        if self.status_mode == "most_likely":
            return classes[int(probs.argmax())]
        return classes[int(self._rng.choice(len(classes), p=probs / probs.sum()))]


def _state(observation: str) -> _State:
    """(task id, turns done, last score, best score so far) that an observation shows."""
    report = parse_report(observation)
    if report is not None:
        return report.task_id, report.turn, report.score, report.best_score
    head = _DESCRIPTION_HEAD.match(observation)
    if head is None:
        raise ValueError(f"not a task description or a turn report: {observation[:80]!r}")
    return head.group(1), 0, None, None


def _is_stop(action: Any) -> bool:
    return isinstance(action, str) and action == STOP


def _program(action: Any, kind: str) -> str:
    if isinstance(action, str):
        return action
    return render_program(ProgramSpec.from_action(action), kind)


@functools.lru_cache(maxsize=1)
def error_messages() -> dict[str | None, str]:
    """The most common real crash message of each error class in the execution table
    (key ``None``: the most common of all, for a class the table never saw)."""
    from .tables import load_table

    counts: dict[str | None, collections.Counter[str]] = collections.defaultdict(
        collections.Counter
    )
    for row in load_table().rows:
        if row.status in ("crashed", "out_of_memory"):
            message = row.message.removeprefix("exit status 1: ")
            counts[error_class(row.message)][message] += 1
            counts[None][message] += 1
    return {cls: counter.most_common(1)[0][0] for cls, counter in counts.items()}
