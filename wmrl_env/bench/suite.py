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
    >>> abs(table.expected(uniform) - float(table.scores.mean())) < 1e-12
    True
    >>> abs(table.greedy(uniform) - table.expected(uniform)) < 1e-12   # ties at random
    True
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

SPLITS: tuple[str, ...] = ("wm", "train", "heldout")


def split_tasks(name: str) -> tuple[str, ...]:
    """The task ids of a split of the ML task suite that the execution table covers.

    A task the committed table has no rows for cannot be replayed or scored: it is left out
    with a warning (while the suite's tables are being built, the bench runs on the tasks
    that have them).
    """
    from wmrl_env.envs.ml_tasks import load_table, task_ids

    if name not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {name!r}")
    tasks = tuple(task_ids(name))
    covered = set(load_table().task_ids)
    kept = tuple(t for t in tasks if t in covered)
    if len(kept) < len(tasks):
        warnings.warn(
            f"the execution table covers {len(kept)} of the {len(tasks)} tasks of the "
            f"{name!r} split: the bench uses those {len(kept)}",
            stacklevel=2,
        )
    if not kept:
        raise ValueError(f"the execution table covers no task of the {name!r} split")
    return kept


def sample_tasks(tasks: Sequence[str], count: int, seed: int = 0) -> tuple[str, ...]:
    """A fixed sample of ``count`` tasks in their split order (all of them for 0).

    >>> sample_tasks(("a", "b", "c"), 0), len(sample_tasks(("a", "b", "c"), 2))
    (('a', 'b', 'c'), 2)
    """
    if count <= 0 or count >= len(tasks):
        return tuple(tasks)
    picks = np.sort(np.random.default_rng(seed).choice(len(tasks), size=count, replace=False))
    return tuple(tasks[int(i)] for i in picks)


def _raw_features(task_id: str) -> np.ndarray:
    from wmrl_env.envs.ml_tasks import get_task
    from wmrl_env.envs.ml_tasks.features import task_features as features_of

    return features_of(get_task(task_id))


def task_features(task_ids: Sequence[str], reference: Sequence[str]) -> np.ndarray:
    """``(len(task_ids), F)`` task features (:data:`~wmrl_env.envs.ml_tasks.features.
    TASK_FEATURE_NAMES`, from the train file alone), each column standardised on the
    ``reference`` tasks (the train split); a feature a task lacks (NaN) becomes the mean, 0."""
    if not task_ids:
        raise ValueError("give at least one task")
    ref = np.stack([_raw_features(t) for t in reference])
    with warnings.catch_warnings():  # a column NaN for every reference task stays NaN -> 0
        warnings.simplefilter("ignore", RuntimeWarning)
        mean, std = np.nanmean(ref, axis=0), np.nanstd(ref, axis=0)
    rows = np.stack([_raw_features(t) for t in task_ids])
    scaled = (rows - mean) / np.where(std > 0, std, 1.0)
    return np.nan_to_num(scaled, nan=0.0, posinf=0.0, neginf=0.0)


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
        """Mean score of each task's most likely program, ties broken at random (the mean
        over the tied programs: an untrained, uniform policy scores the uniform mean, not
        the first program's score)."""
        from wmrl_env.bench.bank import greedy_scores

        return float(greedy_scores(self._check(probabilities), self.scores).mean())

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
