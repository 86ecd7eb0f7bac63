"""An ML task: a seeded train/test split, its description, data export and host-side scorer.

The agent sees :attr:`MLTask.description` and the exported ``train.csv`` / ``test.csv``; the
test labels stay in this process and are used only by :class:`TaskScorer`, which runs on the
host after the sandboxed program has written ``predictions.csv``.

Example:
    >>> from wmrl_env.envs.ml_tasks.datasets import load_dataset
    >>> task = MLTask.from_dataset("iris", load_dataset("iris"), metric="accuracy")
    >>> task.kind, len(task.test_ids), round(task.baseline, 3)
    ('multiclass', 45, 0.333)
    >>> csv = "id,prediction\\n" + "".join(f"{i},0\\n" for i in task.test_ids)
    >>> task.evaluate({"predictions.csv": csv.encode()}) == task.baseline
    True
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from wmrl_env.sandboxes.job import Job

from .datasets import Dataset
from .scoring import METRICS, normalised_score, read_predictions
from .task_files import TaskFiles, default_data_root, holdout_mask, trivial_predictions

__all__ = ["DEFAULT_TIMEOUT_S", "MLTask", "TaskScorer", "default_data_root"]

TEST_FRACTION = 0.3
SPLIT_SEED = 20240601
DEFAULT_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class TaskScorer:
    """Scores a job's ``predictions.csv`` against the hidden labels (picklable, host side).

    Returns the normalised score when ``normalise`` is true, else the raw metric value.
    """

    task_id: str
    metric: str
    test_ids: np.ndarray = field(repr=False)
    y_test: np.ndarray = field(repr=False)
    classes: np.ndarray | None = field(repr=False)
    baseline: float
    reference: float
    normalise: bool = True

    def raw(self, outputs: Mapping[str, bytes]) -> float:
        predictions = read_predictions(outputs, self.test_ids, classes=self.classes)
        return METRICS[self.metric](self.y_test, predictions)

    def __call__(self, outputs: Mapping[str, bytes]) -> float:
        raw = self.raw(outputs)
        if not self.normalise:
            return raw
        return normalised_score(raw, baseline=self.baseline, reference=self.reference)


@dataclass(frozen=True, eq=False)
class MLTask(TaskFiles):
    """One supervised learning task with hidden test labels.

    Build it with :meth:`from_dataset` (or :func:`~wmrl_env.envs.ml_tasks.get_task` for the
    registered tasks). ``reference`` is the raw metric value that normalises to 1: the best
    score seen in the committed execution table, or the metric's ideal value for a task
    outside the table.
    """

    task_id: str
    dataset: Dataset = field(repr=False)
    metric: str
    X_train: np.ndarray = field(repr=False)
    y_train: np.ndarray = field(repr=False)
    X_test: np.ndarray = field(repr=False)
    test_ids: np.ndarray = field(repr=False)
    _y_test: np.ndarray = field(repr=False)
    baseline: float
    reference: float
    timeout_s: float = DEFAULT_TIMEOUT_S

    @classmethod
    def from_dataset(
        cls,
        task_id: str,
        dataset: Dataset,
        *,
        metric: str,
        max_rows: int | None = None,
        reference: float | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        split_seed: int = SPLIT_SEED,
    ) -> MLTask:
        """Split ``dataset`` deterministically (seeded by ``split_seed`` and the task id) into
        train and test.

        Classification splits are stratified; ``max_rows`` first draws a seeded subsample
        (from the same seeded stream, so another ``split_seed`` redraws it too). The suite and
        its execution table use :data:`SPLIT_SEED`; another seed gives the same task under a
        second split (how stable program rankings are across splits).
        """
        if metric not in METRICS:
            raise ValueError(f"unknown metric {metric!r}; known: {sorted(METRICS)}")
        if (metric == "roc_auc") != (dataset.kind == "binary"):
            raise ValueError(f"metric {metric!r} does not fit a {dataset.kind} task")
        rng = np.random.default_rng([split_seed, zlib.crc32(task_id.encode())])
        rows = np.arange(len(dataset.y))
        if max_rows is not None and len(rows) > max_rows:
            rows = np.sort(rng.choice(rows, size=max_rows, replace=False))
        test = holdout_mask(dataset.y[rows], dataset.kind, rng, TEST_FRACTION)
        train_rows, test_rows = rng.permutation(rows[~test]), rng.permutation(rows[test])
        y_train, y_test = dataset.y[train_rows], dataset.y[test_rows]
        spec = METRICS[metric]
        baseline = spec(y_test, trivial_predictions(dataset.kind, y_train, len(y_test)))
        return cls(
            task_id=task_id,
            dataset=dataset,
            metric=metric,
            X_train=dataset.X[train_rows],
            y_train=y_train,
            X_test=dataset.X[test_rows],
            test_ids=np.arange(len(test_rows)),
            _y_test=y_test,
            baseline=baseline,
            reference=spec.ideal if reference is None else float(reference),
            timeout_s=timeout_s,
        )

    def scorer(self, *, normalise: bool = True) -> TaskScorer:
        return TaskScorer(
            task_id=self.task_id,
            metric=self.metric,
            test_ids=self.test_ids,
            y_test=self._y_test,
            classes=self.classes,
            baseline=self.baseline,
            reference=self.reference,
            normalise=normalise,
        )

    def evaluate(self, outputs: Mapping[str, bytes]) -> float:
        """The raw metric of a job's outputs; raises ``InvalidOutputError`` if unscoreable."""
        return self.scorer(normalise=False).raw(outputs)

    def normalise(self, raw: float) -> float:
        """The normalised score of a raw metric value (see ``scoring.normalised_score``)."""
        return normalised_score(raw, baseline=self.baseline, reference=self.reference)

    def make_job(
        self,
        program: str,
        *,
        data_root: str | os.PathLike[str] | None = None,
        timeout_s: float | None = None,
        normalise: bool = True,
        tags: Mapping[str, Any] | None = None,
    ) -> Job:
        """A :class:`~wmrl_env.sandboxes.job.Job` that runs ``program`` on this task.

        Its tags carry ``task_id`` and ``program_hash`` (what the replay executor and the
        execution log key on), plus any ``tags`` given.
        """
        return self._job(program, self.scorer(normalise=normalise), data_root, timeout_s, tags)
