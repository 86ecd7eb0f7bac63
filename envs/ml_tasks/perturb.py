"""The seeded per-task perturbation that makes a task's rows unmatchable by value.

Applied to every registered task's dataset before its train / test split:

* **noise**: every feature column with more than :data:`NOISE_MIN_DISTINCT` distinct values
  gets Gaussian noise of :data:`NOISE_SCALE` times its standard deviation, so no row equals
  its public original, exactly or after rounding (indicator, binary and small-count columns
  are left as they are: noise would change their meaning);
* **column order**: the feature columns are shuffled (names travel with their column).

Targets are never touched, so the task stays the same problem: the noise costs an honest
model a measurement error of 5 % of each feature's spread (its R^2 drops by well under a
percent on a linear signal). What it does not stop: matching each row to its *nearest*
public row, which a 5 % noise barely moves. The real defence is that no copy is reachable
from the sandbox; see ``docs/tasks.md`` ("Hidden labels: the threat model").

Example:
    >>> from wmrl_env.envs.ml_tasks.datasets import load_dataset
    >>> wine = load_dataset("wine")
    >>> noisy = perturb(wine, "wine")
    >>> sorted(noisy.feature_names) == sorted(wine.feature_names), noisy.feature_names[0]
    (True, 'flavanoids')
    >>> bool((noisy.y == wine.y).all()), bool((noisy.X == perturb(wine, "wine").X).all())
    (True, True)
"""

from __future__ import annotations

import dataclasses
import zlib

import numpy as np

from .datasets import Dataset

__all__ = ["NOISE_MIN_DISTINCT", "NOISE_SCALE", "PERTURB_SEED", "perturb"]

PERTURB_SEED = 20261203
NOISE_SCALE = 0.05
NOISE_MIN_DISTINCT = 10


def perturb(dataset: Dataset, task_id: str) -> Dataset:
    """The dataset with seeded noise on its continuous columns and its columns shuffled."""
    rng = np.random.default_rng([PERTURB_SEED, zlib.crc32(task_id.encode())])
    X = dataset.X.copy()
    for j in range(X.shape[1]):
        column = X[:, j]
        present = ~np.isnan(column)
        if np.unique(column[present]).size > NOISE_MIN_DISTINCT:
            scale = NOISE_SCALE * float(np.std(column[present]))
            column[present] += rng.normal(0.0, scale, size=int(present.sum()))
    order = rng.permutation(X.shape[1])
    return dataclasses.replace(
        dataset,
        X=X[:, order],
        feature_names=tuple(dataset.feature_names[j] for j in order),
        notes=" ".join(p for p in (dataset.notes, NOISE_NOTE) if p),
    )


NOISE_NOTE = (
    "Continuous feature values carry a small seeded noise (5 % of each column's standard "
    "deviation) and the columns are in a shuffled order."
)
