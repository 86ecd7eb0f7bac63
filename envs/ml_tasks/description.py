"""The task description: the plain-ASCII text that the agent and the world model read.

Example:
    >>> from wmrl_env.envs.ml_tasks import get_task
    >>> text = get_task("iris").description
    >>> text.splitlines()[0]
    "Task iris: Fisher's iris flowers (scikit-learn bundled data)"
    >>> "write predictions.csv" in text and text.isascii()
    True
"""

from __future__ import annotations

import string
import textwrap
from typing import Protocol

import numpy as np

from .datasets import Dataset
from .scoring import METRICS

__all__ = ["DESCRIPTION_CHARSET", "DescribedTask", "describe"]

DESCRIPTION_CHARSET = string.printable
"""Every character a description may hold (printable ASCII and whitespace)."""

_KIND_WORDS = {
    "binary": "binary classification",
    "multiclass": "multiclass classification",
    "regression": "regression",
}
_PREDICTION_WORDS = {
    "binary": "a real-valued score for class 1, higher meaning more likely 1 (for example "
    "its probability); only the ranking matters",
    "multiclass": "the predicted class label, an integer",
    "regression": "the predicted target value",
}
_BASELINE_WORDS = {
    "binary": "a constant score",
    "multiclass": "always the most frequent training class",
    "regression": "always the training mean",
}


class DescribedTask(Protocol):
    """What :func:`describe` reads of a task (an :class:`~.tasks.MLTask` has it all): the
    description depends on the task's data, never the other way round."""

    task_id: str
    dataset: Dataset
    metric: str
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    test_ids: np.ndarray
    baseline: float
    timeout_s: float

    @property
    def kind(self) -> str: ...


def describe(task: DescribedTask) -> str:
    data = task.dataset
    metric = METRICS[task.metric]
    kind = _KIND_WORDS[task.kind]
    if task.kind == "multiclass":
        kind += f" ({len(np.unique(task.y_train))} classes)"
    missing_train = int(np.isnan(task.X_train).sum())
    missing_test = int(np.isnan(task.X_test).sum())
    missing = (
        f"Missing values are empty cells ({missing_train} in train, {missing_test} in test)."
        if missing_train or missing_test
        else "There are no missing values."
    )
    paragraphs = [
        f"Task {task.task_id}: {data.title}",
        f"Type: {kind}. {data.about}",
        f"Target: {data.target}.",
        data.notes,
        f"Metric: {metric.description}, {'higher' if metric.higher_is_better else 'lower'} is "
        f"better. Trivial baseline ({_BASELINE_WORDS[task.kind]}): {task.baseline:.4g}.",
        f"Data (read-only): inputs/train.csv has the columns id, the {len(data.feature_names)} "
        f"features and target ({len(task.y_train)} rows); inputs/test.csv has id and the same "
        f"features ({len(task.test_ids)} rows). {missing}",
        "Features: " + ", ".join(data.feature_names) + ".",
        "Output: write predictions.csv in the working directory with the header id,prediction "
        f"and exactly one row per test id; prediction is {_PREDICTION_WORDS[task.kind]}.",
        f"Environment: Python 3 with numpy and scikit-learn, no network, a time limit of "
        f"{task.timeout_s:g} s.",
    ]
    text = "\n".join(textwrap.fill(p, width=100) for p in paragraphs if p)
    bad = sorted(set(text) - set(DESCRIPTION_CHARSET))
    if bad:
        raise ValueError(f"description of {task.task_id} holds non-ASCII characters {bad}")
    return text
