"""The held-out tasks as the per-task regime sees them: every program's text, table score
and recorded execution seconds, and the world model's view of them.

A :class:`TaskBank` holds, for ``T`` tasks and the 72 programs of
:func:`~wmrl_env.envs.ml_tasks.all_programs`, the rendered program texts (what a world model
reads), the table's normalised scores (a failed program scores 0, the reward the env gives
it) and the seconds each recorded execution took (what a real execution is charged).
:func:`greedy_scores` scores a policy's most likely program with ties broken at random (the
expected score of a uniform pick among the tied programs), so an untrained policy scores
the uniform mean, not program 0's score.

Example:
    >>> import numpy as np
    >>> scores = np.array([[0.2, 1.0, 0.6], [0.5, 0.5, 0.0]])
    >>> greedy_scores(np.zeros((2, 3)), scores).round(3).tolist()   # all tied: the mean
    [0.6, 0.333]
    >>> greedy_scores(np.array([[0.0, 2.0, 2.0], [1.0, 0.0, 0.0]]), scores).tolist()
    [0.8, 0.5]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from wmrl_env.world_models.base import Prediction


def greedy_scores(preferences: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Per row, the mean score of the programs tied at the row's maximum preference
    (logits or probabilities): the expected score of the greedy pick, ties broken at random."""
    preferences = np.asarray(preferences, dtype=np.float64)
    if preferences.shape != np.shape(scores):
        raise ValueError(f"preferences of shape {preferences.shape}, expected {np.shape(scores)}")
    top = preferences.max(axis=1, keepdims=True)
    tied = preferences >= top - 1e-12 * np.maximum(1.0, np.abs(top))
    return (np.where(tied, scores, 0.0).sum(axis=1)) / tied.sum(axis=1)


@dataclass(frozen=True)
class TaskBank:
    """``scores[t, p]`` and ``seconds[t, p]`` of program ``p`` on task ``task_ids[t]``;
    ``texts[t][p]`` is the program as the sandbox runs it, ``descriptions[t]`` the task as
    the agent and the world model read it."""

    task_ids: tuple[str, ...]
    descriptions: tuple[str, ...]
    texts: tuple[tuple[str, ...], ...]
    scores: np.ndarray
    seconds: np.ndarray
    choices: tuple[Mapping[str, Any], ...] = ()
    """per program, its components ``{slot: value}`` (what a factorized policy sums over)"""
    private: np.ndarray | None = None
    """``private[t, p]``: what program ``p`` scores deployed on task ``t``'s private test,
    where that differs from the reward ``scores`` (None: the reward is the deploy score)"""

    @property
    def deploy(self) -> np.ndarray:
        """The score a deployed program is read on: ``private`` if any, else ``scores``."""
        return self.scores if self.private is None else self.private

    @classmethod
    def of(cls, task_ids: Sequence[str]) -> TaskBank:
        from wmrl_env.envs.ml_tasks import all_programs, get_task, load_table, render_program

        table, programs = load_table(), all_programs()
        rows = [[table.lookup(t, p) for p in programs] for t in task_ids]
        return cls(
            task_ids=tuple(task_ids),
            descriptions=tuple(get_task(t).description for t in task_ids),
            texts=tuple(
                tuple(render_program(p, get_task(t).kind) for p in programs) for t in task_ids
            ),
            scores=np.array([[_reward(r) for r in row] for row in rows]),
            seconds=np.array([[r.exec_seconds for r in row] for row in rows]),
            choices=tuple(
                {"preprocessing": p.preprocessing, "model": p.model, "capacity": p.capacity}
                for p in programs
            ),
        )

    @property
    def num_tasks(self) -> int:
        return len(self.task_ids)

    @property
    def num_programs(self) -> int:
        return self.scores.shape[1]

    def predict(self, world_model, tasks: np.ndarray, programs: np.ndarray) -> Prediction:
        """The world model's prediction for program ``programs[i]`` on task ``tasks[i]``."""
        tasks, programs = np.asarray(tasks), np.asarray(programs)
        contexts = [self.descriptions[t] for t in tasks]
        texts = [self.texts[t][p] for t, p in zip(tasks, programs, strict=True)]
        return world_model.predict(contexts, texts)

    def predict_all(self, world_model, tasks: Sequence[int] | None = None) -> Prediction:
        """Predictions for every program of ``tasks`` (default: every task), rows in order."""
        tasks = np.arange(self.num_tasks) if tasks is None else np.asarray(tasks)
        grid_tasks = np.repeat(tasks, self.num_programs)
        grid_programs = np.tile(np.arange(self.num_programs), len(tasks))
        return self.predict(world_model, grid_tasks, grid_programs)

    def learn(self, world_model, tasks: np.ndarray, programs: np.ndarray) -> None:
        """Teach the world model the real scores of executed (task, program) pairs."""
        from wmrl_env.world_models.base import learn_from_real_scores

        tasks, programs = np.asarray(tasks), np.asarray(programs)
        contexts = [self.descriptions[t] for t in tasks]
        texts = [self.texts[t][p] for t, p in zip(tasks, programs, strict=True)]
        learn_from_real_scores(world_model, contexts, texts, self.scores[tasks, programs])

    def truth(self) -> dict[tuple[str, str], float]:
        """(description, program text) -> table score: what a world model of perfect
        knowledge would predict (for dialled world models)."""
        return {
            (self.descriptions[t], self.texts[t][p]): float(self.scores[t, p])
            for t in range(self.num_tasks)
            for p in range(self.num_programs)
        }


def _reward(row) -> float:
    return float(row.score) if row.status == "ok" and np.isfinite(row.score) else 0.0


class TaskPredictions:
    """A world model's predictions on a bank, remembered per (task, program) until the task
    is taught (:meth:`learn`): exact for a world model whose prediction on a task changes
    only through anchors of that task (``per_task=True``; e.g. the default ML world model,
    a per-task residual correction on a fixed base). ``per_task=False`` asks the model every
    time (any world model, e.g. a random one).

    Example:
        >>> import numpy as np
        >>> from wmrl_env.bench.world_model import RandomWorldModel
        >>> bank = TaskBank(("t",), ("task",), (("a", "b"),), np.array([[0.0, 1.0]]),
        ...                 np.ones((1, 2)))
        >>> cached = TaskPredictions(bank, RandomWorldModel(seed=0), per_task=True)
        >>> first = cached.predict(np.array([0, 0]), np.array([0, 1])).scores
        >>> bool((cached.predict(np.array([0]), np.array([1])).scores == first[1]).all())
        True
    """

    def __init__(self, bank: TaskBank, world_model, per_task: bool) -> None:
        self.bank = bank
        self.world_model = world_model
        self.per_task = per_task
        shape = bank.scores.shape
        self._scores = np.full(shape, np.nan)
        self._std = np.full(shape, np.nan)
        self._valid = np.zeros(shape, dtype=bool)
        self._known = np.zeros(shape, dtype=bool)
        self._has_std = True

    def predict(self, tasks: np.ndarray, programs: np.ndarray) -> Prediction:
        tasks, programs = np.asarray(tasks), np.asarray(programs)
        if not self.per_task:
            return self.bank.predict(self.world_model, tasks, programs)
        missing = ~self._known[tasks, programs]
        if missing.any():
            pairs = np.unique(np.stack([tasks[missing], programs[missing]]), axis=1)
            fresh = self.bank.predict(self.world_model, pairs[0], pairs[1])
            self._scores[pairs[0], pairs[1]] = fresh.scores
            self._has_std = fresh.std is not None
            if fresh.std is not None:
                self._std[pairs[0], pairs[1]] = fresh.std
            valid = np.ones(len(fresh.scores), bool) if fresh.valid is None else fresh.valid
            self._valid[pairs[0], pairs[1]] = valid
            self._known[pairs[0], pairs[1]] = True
        valid = self._valid[tasks, programs]
        return Prediction(
            scores=self._scores[tasks, programs],
            std=self._std[tasks, programs] if self._has_std else None,
            valid=valid,
            reasons=["" if v else "invalid" for v in valid],
        )

    def learn(self, tasks: np.ndarray, programs: np.ndarray) -> None:
        """Teach the world model; forget the taught tasks' remembered predictions."""
        self.bank.learn(self.world_model, tasks, programs)
        self._known[np.unique(tasks)] = False


def predicts_per_task(world_model, num_tasks: int) -> bool:
    """Whether ``world_model``'s prediction on a task changes only when that task is
    taught: the default ML world model (a fixed base plus a per-task residual posterior,
    holding at least ``num_tasks`` tasks), alone or dialled towards the truth."""
    from wmrl_env.bench.world_model import MixedWorldModel
    from wmrl_env.world_models.programs.open_space import OpenSpaceWorldModel
    from wmrl_env.world_models.programs.program_task import ProgramTaskWorldModel

    inner = world_model.inner if isinstance(world_model, MixedWorldModel) else world_model
    per_task = (ProgramTaskWorldModel, OpenSpaceWorldModel)
    return isinstance(inner, per_task) and inner.max_tasks >= num_tasks
