"""The task suite as the bench sees it: its splits, what the policy reads, the table's scores.

* :func:`split_tasks`: the task ids of the ``wm``, ``train`` and ``heldout`` splits;
* :func:`task_features`: per task, the numbers the policy is conditioned on, computed from
  what an agent sees (the train file), standardised on the train split;
* :class:`ScoreTable`: every program's normalised table score on a set of tasks, which
  scores a policy on held-out tasks without executing (or charging) anything.

Example:
    >>> table = ScoreTable.of(("wine", "diabetes"))
    >>> table.scores.shape, float(table.scores.max())
    ((2, 72), 1.0)
    >>> uniform = np.full((2, 72), 1 / 72)
    >>> table.expected(uniform) == float(table.scores.mean())
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

SPLITS: tuple[str, ...] = ("wm", "train", "heldout")


def split_tasks(name: str) -> tuple[str, ...]:
    """The task ids of a split of the ML task suite.

    The 18-task suite has no ``wm`` split: there its world model is fitted on the ``train``
    tasks (which the policy then trains on; ``docs/benchmarks.md`` says so beside every
    figure measured that way).
    """
    from wmrl_env.envs.ml_tasks import task_ids

    if name not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {name!r}")
    try:
        return tuple(task_ids(name))
    except ValueError:
        if name == "wm":
            return tuple(task_ids("train"))
        raise


def _raw_features(task_id: str) -> np.ndarray:
    """Stand-in task features from the train file an agent reads: size, width, kind, class
    count, missing values, skew, negative values."""
    from wmrl_env.envs.ml_tasks import get_task

    task = get_task(task_id)
    X = np.asarray(task.X_train, dtype=np.float64)
    rows, columns = X.shape
    finite = np.where(np.isfinite(X), X, np.nan)
    centred = finite - np.nanmean(finite, axis=0)
    spread = np.nanstd(finite, axis=0)
    skew = np.nanmean(centred**3, axis=0) / np.where(spread > 0, spread, 1.0) ** 3
    classes = len(np.unique(task.y_train)) if task.kind != "regression" else 0
    return np.array(
        [
            np.log(rows),
            np.log(columns),
            np.log(rows / columns),
            float(task.kind == "binary"),
            float(task.kind == "multiclass"),
            float(task.kind == "regression"),
            np.log1p(classes),
            float(np.isnan(finite).mean()),
            float(np.log1p(np.nanmean(np.abs(skew)))),
            float(np.nanmean(finite < 0)),
        ]
    )


def task_features(task_ids: Sequence[str], reference: Sequence[str]) -> np.ndarray:
    """``(len(task_ids), F)`` features, each column standardised on the ``reference`` tasks
    (the train split: what the policy was fitted on)."""
    if not task_ids:
        raise ValueError("give at least one task")
    ref = np.stack([_raw_features(t) for t in reference])
    mean, std = ref.mean(axis=0), ref.std(axis=0)
    rows = np.stack([_raw_features(t) for t in task_ids])
    return (rows - mean) / np.where(std > 0, std, 1.0)


@dataclass(frozen=True)
class ScoreTable:
    """``scores[t, p]``: the table's normalised score of program ``p`` (index order of
    :func:`~wmrl_env.envs.ml_tasks.all_programs`) on task ``task_ids[t]``; a failed
    program scores 0, the reward the env gives it."""

    task_ids: tuple[str, ...]
    scores: np.ndarray

    @classmethod
    def of(cls, task_ids: Sequence[str]) -> ScoreTable:
        from wmrl_env.envs.ml_tasks import all_programs, load_table

        table = load_table()
        scores = np.array(
            [
                [_score_of(table.lookup(task, program)) for program in all_programs()]
                for task in task_ids
            ]
        )
        return cls(tuple(task_ids), scores)

    def greedy(self, probabilities: np.ndarray) -> float:
        """Mean score of each task's most likely program."""
        picks = np.argmax(self._check(probabilities), axis=1)
        return float(self.scores[np.arange(len(picks)), picks].mean())

    def expected(self, probabilities: np.ndarray) -> float:
        """Mean over tasks of the expected score under the program distribution."""
        return float((self._check(probabilities) * self.scores).sum(axis=1).mean())

    def _check(self, probabilities: np.ndarray) -> np.ndarray:
        probabilities = np.asarray(probabilities, dtype=np.float64)
        if probabilities.shape != self.scores.shape:
            raise ValueError(
                f"probabilities of shape {probabilities.shape}, expected {self.scores.shape}"
            )
        return probabilities


def _score_of(row) -> float:
    return float(row.score) if row.status == "ok" and np.isfinite(row.score) else 0.0
