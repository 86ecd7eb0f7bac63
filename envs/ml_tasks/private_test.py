"""Tasks with two scores per execution: a validation score (the reward) and a private test.

A :class:`PrivateTestTask` splits its rows three ways, seeded by the task id:

* **fit** rows, exported with their labels as ``inputs/train.csv``;
* **validation** rows, public rows held out of ``train.csv``: their labels stay on the host
  and give the reward (:meth:`PrivateTestTask.make_job`'s scorer holds them and nothing else);
* **private** rows, whose labels no reward reads: only :meth:`PrivateTestTask.private_score`
  holds them, applied by the caller to a finished execution's ``predictions.csv``.

``inputs/test.csv`` holds the features of the validation and the private rows, shuffled
together under fresh ids, so a program predicts both in one run and cannot tell which row
counts for what. One execution therefore yields both scores from one fitted model.

The validation split is fixed (``validation_fraction`` of the public rows, stratified for
classification); ``fold=(repeat, k, n_folds)`` selects fold ``k`` of a repeated K-fold
partition of the same public rows instead (one execution per fold), which is how the
noise of the two schemes was compared (``benchmarks/validation_noise.py``).

Example:
    >>> from wmrl_env.envs.ml_tasks.synthetic import synthetic_dataset
    >>> task = PrivateTestTask.from_dataset(
    ...     "moons", synthetic_dataset("moons", 0), metric="roc_auc", private_fraction=0.5
    ... )
    >>> len(task.y_train), len(task.valid_positions), len(task.private_positions)
    (224, 76, 300)
    >>> csv = "id,prediction\\n" + "".join(f"{i},0.5\\n" for i in task.test_ids)
    >>> outputs = {"predictions.csv": csv.encode()}
    >>> task.make_job("...").scorer(outputs), task.private_score(outputs, normalise=False)
    (0.0, 0.5)
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from wmrl_env.sandboxes.job import Job

from .datasets import Dataset, TaskKind
from .scoring import METRICS, normalised_score, read_predictions
from .task_files import TaskFiles, holdout_mask, trivial_predictions
from .tasks import DEFAULT_TIMEOUT_S

__all__ = ["VALIDATION_FRACTION", "PrivateTestTask", "SubsetScorer"]

VALIDATION_FRACTION = 0.25
SUITE_SEED = 20261205


@dataclass(frozen=True)
class SubsetScorer:
    """Reads a prediction for every test id and scores one subset of them (host side).

    ``positions`` index ``test_ids``; ``y`` holds the labels of those rows only, so a
    scorer built for the validation rows carries no private label.
    """

    task_id: str
    metric: str
    test_ids: np.ndarray = field(repr=False)
    positions: np.ndarray = field(repr=False)
    y: np.ndarray = field(repr=False)
    classes: np.ndarray | None = field(repr=False)
    baseline: float
    reference: float
    normalise: bool = True

    def raw(self, outputs: Mapping[str, bytes]) -> float:
        predictions = read_predictions(outputs, self.test_ids, classes=self.classes)
        return METRICS[self.metric](self.y, predictions[self.positions])

    def __call__(self, outputs: Mapping[str, bytes]) -> float:
        raw = self.raw(outputs)
        if not self.normalise:
            return raw
        return normalised_score(raw, baseline=self.baseline, reference=self.reference)


@dataclass(frozen=True, eq=False)
class PrivateTestTask(TaskFiles):
    """A task whose executions are rewarded on validation rows and deployed on private rows.

    Build it with :meth:`from_dataset`. ``X_train`` / ``y_train`` are the fit rows (what the
    program sees with labels), ``X_test`` / ``test_ids`` the validation and private rows
    (features only). ``baseline`` is the trivial baseline on the validation rows (the
    reward's zero), ``private_baseline`` the same on the private rows.
    """

    task_id: str
    dataset: Dataset = field(repr=False)
    metric: str
    X_train: np.ndarray = field(repr=False)
    y_train: np.ndarray = field(repr=False)
    X_test: np.ndarray = field(repr=False)
    test_ids: np.ndarray = field(repr=False)
    valid_positions: np.ndarray = field(repr=False)
    private_positions: np.ndarray = field(repr=False)
    _y_valid: np.ndarray = field(repr=False)
    _y_private: np.ndarray = field(repr=False)
    baseline: float
    private_baseline: float
    reference: float
    timeout_s: float = DEFAULT_TIMEOUT_S

    @classmethod
    def from_dataset(
        cls,
        task_id: str,
        dataset: Dataset,
        *,
        metric: str,
        private_fraction: float,
        validation_fraction: float = VALIDATION_FRACTION,
        fold: tuple[int, int, int] | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> PrivateTestTask:
        """Split ``dataset`` into fit / validation / private rows, seeded by the task id.

        Args:
            private_fraction: share of all rows that form the private test (stratified).
            validation_fraction: share of the public rows held out for the reward.
            fold: ``(repeat, k, n_folds)``: the validation rows are fold ``k`` of a
                stratified ``n_folds``-fold partition of the public rows, drawn with seed
                ``repeat``; the private rows do not change.
        """
        if metric not in METRICS:
            raise ValueError(f"unknown metric {metric!r}; known: {sorted(METRICS)}")
        if (metric == "roc_auc") != (dataset.kind == "binary"):
            raise ValueError(f"metric {metric!r} does not fit a {dataset.kind} task")
        for name, value in (
            ("private_fraction", private_fraction),
            ("validation_fraction", validation_fraction),
        ):
            if not 0.0 < value < 1.0:
                raise ValueError(f"{name} must be in (0, 1), got {value}")
        key = zlib.crc32(task_id.encode())
        rows = np.arange(len(dataset.y))
        private = holdout_mask(
            dataset.y, dataset.kind, np.random.default_rng([SUITE_SEED, key, 0]), private_fraction
        )
        public = rows[~private]
        if fold is None:
            rng = np.random.default_rng([SUITE_SEED, key, 1])
            valid = holdout_mask(dataset.y[public], dataset.kind, rng, validation_fraction)
        else:
            valid = _fold_mask(dataset.y[public], dataset.kind, fold, key)
        fit_rows = public[~valid]
        rng = np.random.default_rng([SUITE_SEED, key, 2])
        fit_rows = rng.permutation(fit_rows)
        scored = np.concatenate([public[valid], rows[private]])
        order = rng.permutation(len(scored))  # test.csv row i is scored[order[i]]
        is_valid = order < int(valid.sum())
        y_valid, y_private = dataset.y[scored[order[is_valid]]], dataset.y[scored[order[~is_valid]]]
        y_train = dataset.y[fit_rows]
        spec = METRICS[metric]
        return cls(
            task_id=task_id,
            dataset=dataset,
            metric=metric,
            X_train=dataset.X[fit_rows],
            y_train=y_train,
            X_test=dataset.X[scored[order]],
            test_ids=np.arange(len(scored)),
            valid_positions=np.flatnonzero(is_valid),
            private_positions=np.flatnonzero(~is_valid),
            _y_valid=y_valid,
            _y_private=y_private,
            baseline=spec(y_valid, trivial_predictions(dataset.kind, y_train, len(y_valid))),
            private_baseline=spec(
                y_private, trivial_predictions(dataset.kind, y_train, len(y_private))
            ),
            reference=spec.ideal,
            timeout_s=timeout_s,
        )

    def validation_scorer(self, *, normalise: bool = True) -> SubsetScorer:
        """The reward's scorer: it holds the validation labels and no private label."""
        return self._scorer(self.valid_positions, self._y_valid, self.baseline, normalise)

    def private_score(self, outputs: Mapping[str, bytes], *, normalise: bool = False) -> float:
        """The private-test metric of a finished execution's outputs (raw by default;
        normalised: trivial baseline 0, the metric's ideal 1)."""
        scorer = self._scorer(
            self.private_positions, self._y_private, self.private_baseline, normalise
        )
        return scorer(outputs)

    def _scorer(
        self, positions: np.ndarray, y: np.ndarray, baseline: float, normalise: bool
    ) -> SubsetScorer:
        return SubsetScorer(
            task_id=self.task_id,
            metric=self.metric,
            test_ids=self.test_ids,
            positions=positions,
            y=y,
            classes=self.classes,
            baseline=baseline,
            reference=self.reference,
            normalise=normalise,
        )

    def make_job(
        self,
        program: str,
        *,
        data_root: str | os.PathLike[str] | None = None,
        timeout_s: float | None = None,
        normalise: bool = True,
        tags: Mapping[str, Any] | None = None,
    ) -> Job:
        """A job that runs ``program``; its score is the validation score (the reward)."""
        scorer = self.validation_scorer(normalise=normalise)
        return self._job(program, scorer, data_root, timeout_s, tags)


def _fold_mask(y: np.ndarray, kind: TaskKind, fold: tuple[int, int, int], key: int) -> np.ndarray:
    """Fold ``k`` of a stratified ``n_folds``-fold partition drawn with seed ``repeat``."""
    repeat, k, n_folds = fold
    if not (n_folds >= 2 and 0 <= k < n_folds and repeat >= 0):
        raise ValueError(f"fold must be (repeat >= 0, 0 <= k < n_folds, n_folds >= 2), got {fold}")
    rng = np.random.default_rng([SUITE_SEED, key, 3, repeat])
    groups = (
        [np.flatnonzero(y == c) for c in np.unique(y)]
        if kind != "regression"
        else [np.arange(len(y))]
    )
    assignment = np.empty(len(y), dtype=np.int64)
    offset = 0
    for members in groups:  # consecutive numbering across classes keeps fold sizes even
        assignment[rng.permutation(members)] = (offset + np.arange(len(members))) % n_folds
        offset += len(members)
    return assignment == k
