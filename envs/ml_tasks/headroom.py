"""Seeded synthetic tasks whose structure makes program choice matter, with a large private
test (the second suite's generated tasks).

Each family is a generator ``(seed, n_rows) -> Dataset``; the task id
``hr_<family>_s<seed>`` names one member, and :func:`headroom_task` splits it into fit /
validation / private rows (:class:`~.private_test.PrivateTestTask`): 2,000 public rows (1,500
to fit, 500 for the reward) and 6,000 private rows. The families:

* ``interactions`` (regression, R^2): a product of two features, a periodic effect and a
  threshold among eight irrelevant features;
* ``missing`` (binary, ROC-AUC, 15 % positives): heavy-tailed features, a value that is
  missing more often when the label is 1, an interaction;
* ``categories`` (regression, R^2): a 150-level categorical coded as arbitrary integers, an
  hour-of-day feature with a periodic effect, heavy-tailed noise on the target;
* ``periodic`` (multiclass, accuracy, classes 50 / 25 / 15 / 10 %): classes cut from a
  periodic function of two angles plus an interaction, among irrelevant features;
* ``outliers`` (regression, R^2): a sparse linear signal in 30 heavy-tailed features, about
  1 % of the values recorded 50 times too large;
* ``wide_linear`` (regression, R^2): a linear signal in 12 of 80 correlated features (where
  regularised linear models beat trees).

The generators run on the host only: the sandboxes cover this module (like the packages'
dataset files, :mod:`wmrl_env.sandboxes.hidden_data`), so a sandboxed program cannot
regenerate a task and read off its private labels.

Example:
    >>> task = headroom_task("hr_missing_s0")
    >>> task.kind, len(task.y_train), len(task.valid_positions), len(task.private_positions)
    ('binary', 1500, 500, 6000)
    >>> again = headroom_dataset("missing", 0)
    >>> bool(np.array_equal(again.X, task.dataset.X, equal_nan=True))
    True
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from .datasets import Dataset
from .private_test import PrivateTestTask

__all__ = [
    "HEADROOM_FAMILIES",
    "N_PRIVATE",
    "N_PUBLIC",
    "headroom_dataset",
    "headroom_task",
]

N_PUBLIC = 2000
N_PRIVATE = 6000
_METRICS = {
    "interactions": "r2",
    "missing": "roc_auc",
    "categories": "r2",
    "periodic": "accuracy",
    "outliers": "r2",
    "wide_linear": "r2",
}


def _names(prefix: str, n: int) -> tuple[str, ...]:
    return tuple(f"{prefix}{i}" for i in range(n))


def _interactions(rng: np.random.Generator, n: int) -> Dataset:
    X = rng.uniform(-1, 1, size=(n, 12))
    signal = 2.0 * X[:, 0] * X[:, 1] + np.sin(3 * np.pi * X[:, 2]) + 1.5 * (X[:, 3] > 0.3)
    y = signal + rng.normal(scale=0.5, size=n)
    return Dataset(
        name="interactions",
        title="Synthetic: interactions and a periodic effect among irrelevant features",
        about="Twelve features uniform on [-1, 1]; the target depends on a few of them, "
        "not additively.",
        kind="regression",
        target="a continuous response",
        X=X,
        y=y,
        feature_names=_names("x", 12),
    )


def _missing(rng: np.random.Generator, n: int) -> Dataset:
    X = rng.standard_t(df=2, size=(n, 10))
    latent = np.tanh(X[:, 0]) + 0.8 * np.tanh(X[:, 1]) * np.tanh(X[:, 2]) + 0.5 * rng.normal(size=n)
    y = (latent > np.quantile(latent, 0.85)).astype(np.int64)
    X[:, 3] = np.where(rng.uniform(size=n) < np.where(y == 1, 0.6, 0.15), np.nan, X[:, 3])
    X[rng.uniform(size=(n, 10)) < 0.05] = np.nan  # some noise missingness everywhere
    return Dataset(
        name="missing",
        title="Synthetic: heavy tails, informative missingness, imbalanced classes",
        about="Ten heavy-tailed features, some values missing; about 15 % of the rows are class 1.",
        kind="binary",
        target="the class, 0 or 1",
        X=X,
        y=y,
        feature_names=_names("v", 10),
    )


def _categories(rng: np.random.Generator, n: int) -> Dataset:
    levels = 150
    effect = rng.normal(scale=1.0, size=levels)
    codes = rng.permutation(levels)  # integer codes carry no order
    category = rng.integers(levels, size=n)
    hour = rng.uniform(0, 24, size=n)
    other = rng.normal(size=(n, 4))
    signal = effect[category] + 1.2 * np.sin(2 * np.pi * hour / 24) + 0.5 * other[:, 0]
    y = signal + 0.4 * rng.standard_t(df=3, size=n)
    X = np.column_stack([codes[category].astype(float), np.round(hour, 2), other])
    return Dataset(
        name="categories",
        title="Synthetic: a high-cardinality category and an hour-of-day effect",
        about="Six features: a category with 150 levels coded as arbitrary integers, the hour "
        "of day, four numbers.",
        kind="regression",
        target="a continuous response",
        X=X,
        y=y,
        feature_names=("category", "hour", *_names("z", 4)),
    )


def _periodic(rng: np.random.Generator, n: int) -> Dataset:
    angles = rng.uniform(0, 2 * np.pi, size=(n, 2))
    other = rng.normal(size=(n, 6))
    latent = (
        np.sin(2 * angles[:, 0]) + np.cos(angles[:, 1]) + 0.7 * other[:, 0] * other[:, 1]
    ) + 0.3 * rng.normal(size=n)
    cuts = np.quantile(latent, [0.5, 0.75, 0.9])
    y = np.digitize(latent, cuts).astype(np.int64)
    return Dataset(
        name="periodic",
        title="Synthetic: four imbalanced classes from periodic features",
        about="Eight features: two angles in radians and six numbers; classes hold about 50, "
        "25, 15 and 10 % of the rows.",
        kind="multiclass",
        target="the class, 0-3",
        X=np.column_stack([angles, other]),
        y=y,
        feature_names=("angle0", "angle1", *_names("u", 6)),
    )


def _outliers(rng: np.random.Generator, n: int) -> Dataset:
    clean = rng.standard_t(df=3, size=(n, 30))
    weights = np.zeros(30)
    weights[:5] = (2.0, -1.5, 1.0, 1.0, -0.8)
    y = clean @ weights + rng.standard_t(df=4, size=n)
    X = np.where(rng.uniform(size=(n, 30)) < 0.01, clean * 50.0, clean)  # gross errors
    return Dataset(
        name="outliers",
        title="Synthetic: sparse linear signal in heavy-tailed features with recording errors",
        about="Thirty heavy-tailed features, about 1 % of the values recorded grossly too "
        "large; a few carry the signal.",
        kind="regression",
        target="a continuous response",
        X=X,
        y=y,
        feature_names=_names("w", 30),
    )


def _wide_linear(rng: np.random.Generator, n: int) -> Dataset:
    X = rng.normal(size=(n, 80))
    X[:, 40:] = X[:, :40] * 0.6 + 0.8 * X[:, 40:]  # correlated pairs
    weights = np.zeros(80)
    weights[rng.permutation(80)[:12]] = rng.normal(scale=1.0, size=12)
    y = X @ weights + rng.normal(scale=1.0, size=n)
    return Dataset(
        name="wide_linear",
        title="Synthetic: a linear signal spread over many correlated features",
        about="Eighty standard-normal features, correlated in pairs; the target is a noisy "
        "linear function of twelve of them.",
        kind="regression",
        target="a continuous response",
        X=X,
        y=y,
        feature_names=_names("f", 80),
    )


HEADROOM_FAMILIES: dict[str, Callable[[np.random.Generator, int], Dataset]] = {
    "interactions": _interactions,
    "missing": _missing,
    "categories": _categories,
    "periodic": _periodic,
    "outliers": _outliers,
    "wide_linear": _wide_linear,
}
_ID = re.compile(r"^hr_([a-z_]+)_s(\d+)$")


def headroom_dataset(family: str, seed: int, n_rows: int = N_PUBLIC + N_PRIVATE) -> Dataset:
    """Generate member ``seed`` of a family (see :data:`HEADROOM_FAMILIES`)."""
    if family not in HEADROOM_FAMILIES:
        raise ValueError(f"unknown family {family!r}; known: {sorted(HEADROOM_FAMILIES)}")
    if not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    rng = np.random.default_rng([20261205, seed, sorted(HEADROOM_FAMILIES).index(family)])
    return HEADROOM_FAMILIES[family](rng, n_rows)


def headroom_task(task_id: str, fold: tuple[int, int, int] | None = None) -> PrivateTestTask:
    """The task ``hr_<family>_s<seed>``: 2,000 public rows, 6,000 private rows.

    ``fold=(repeat, k, n_folds)``: the validation rows are fold ``k`` of a K-fold partition
    of the public rows instead of the fixed 500 (see :class:`~.private_test.PrivateTestTask`).
    """
    match = _ID.match(task_id)
    if match is None or match.group(1) not in HEADROOM_FAMILIES:
        raise ValueError(
            f"not a generated task id: {task_id!r}; expected hr_<family>_s<seed> with a family "
            f"of {sorted(HEADROOM_FAMILIES)}"
        )
    family, seed = match.group(1), int(match.group(2))
    return PrivateTestTask.from_dataset(
        task_id,
        headroom_dataset(family, seed),
        metric=_METRICS[family],
        private_fraction=N_PRIVATE / (N_PUBLIC + N_PRIVATE),
        fold=fold,
    )
