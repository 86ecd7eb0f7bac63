"""The registered tasks, their fixed train / held-out split, and :func:`get_task`.

Real tasks are named after their dataset; synthetic tasks are ``synth_<family>_s<seed>`` and
any seed builds a fresh member of the family (only the listed ones are in the execution
table, sized to be built in under an hour on a 2-core machine). The split is fixed: world
models are fitted on :data:`TRAIN_TASKS` and evaluated on :data:`HELDOUT_TASKS`; both mix
classification and regression.

Example:
    >>> len(TRAIN_TASKS), len(HELDOUT_TASKS), set(TRAIN_TASKS) & set(HELDOUT_TASKS)
    (12, 6, set())
    >>> get_task("synth_moons_s5").kind
    'binary'
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Literal

from .datasets import load_dataset
from .synthetic import SYNTHETIC_FAMILIES, synthetic_dataset
from .tasks import MLTask

__all__ = [
    "ALL_TASKS",
    "HELDOUT_TASKS",
    "REAL_TASKS",
    "TRAIN_TASKS",
    "TaskSpec",
    "get_task",
    "task_ids",
]


@dataclass(frozen=True)
class TaskSpec:
    """How a registered real task is built from its dataset."""

    dataset: str
    metric: str
    max_rows: int | None = None


REAL_TASKS: dict[str, TaskSpec] = {
    "iris": TaskSpec("iris", "accuracy"),
    "wine": TaskSpec("wine", "accuracy"),
    "breast_cancer": TaskSpec("breast_cancer", "roc_auc"),
    "digits": TaskSpec("digits", "accuracy", max_rows=800),
    "diabetes": TaskSpec("diabetes", "r2"),
    "fair": TaskSpec("fair", "roc_auc", max_rows=1500),
    "randhie": TaskSpec("randhie", "rmse", max_rows=1500),
    "anes96": TaskSpec("anes96", "roc_auc"),
    "modechoice": TaskSpec("modechoice", "roc_auc"),
    "star98": TaskSpec("star98", "r2"),
    "grunfeld": TaskSpec("grunfeld", "rmse"),
    "macrodata": TaskSpec("macrodata", "r2"),
    "engel": TaskSpec("engel", "rmse"),
    "sunspots": TaskSpec("sunspots", "rmse"),
    "fertility": TaskSpec("fertility", "r2"),
}

SYNTHETIC_METRICS: dict[str, str] = {
    "sparse_linear": "rmse",
    "friedman1": "r2",
    "moons": "roc_auc",
    "hastie": "roc_auc",
    "clusters": "accuracy",
}

TRAIN_TASKS: tuple[str, ...] = (
    "iris",
    "breast_cancer",
    "digits",
    "fair",
    "randhie",
    "modechoice",
    "star98",
    "grunfeld",
    "macrodata",
    "fertility",
    "synth_sparse_linear_s0",
    "synth_hastie_s0",
)
HELDOUT_TASKS: tuple[str, ...] = (
    "wine",
    "diabetes",
    "anes96",
    "engel",
    "sunspots",
    "synth_friedman1_s0",
)
ALL_TASKS: tuple[str, ...] = TRAIN_TASKS + HELDOUT_TASKS

_SYNTHETIC_ID = re.compile(r"synth_(?P<family>[a-z0-9_]+)_s(?P<seed>\d+)")


def task_ids(split: Literal["train", "heldout", "all"] = "all") -> tuple[str, ...]:
    """The task ids of a split."""
    splits = {"train": TRAIN_TASKS, "heldout": HELDOUT_TASKS, "all": ALL_TASKS}
    if split not in splits:
        raise ValueError(f"split must be one of {sorted(splits)}, got {split!r}")
    return splits[split]


@functools.lru_cache(maxsize=64)
def get_task(task_id: str) -> MLTask:
    """Build (once per process) the task with this id.

    Its reference score (normalised to 1) is the best raw score in the committed execution
    table, or the metric's ideal value for a task the table does not cover.
    """
    from .tables import reference_scores

    reference = reference_scores().get(task_id)
    if task_id in REAL_TASKS:
        spec = REAL_TASKS[task_id]
        return MLTask.from_dataset(
            task_id,
            load_dataset(spec.dataset),
            metric=spec.metric,
            max_rows=spec.max_rows,
            reference=reference,
        )
    match = _SYNTHETIC_ID.fullmatch(task_id)
    if match and match["family"] in SYNTHETIC_FAMILIES:
        family = match["family"]
        return MLTask.from_dataset(
            task_id,
            synthetic_dataset(family, int(match["seed"])),
            metric=SYNTHETIC_METRICS[family],
            reference=reference,
        )
    raise ValueError(
        f"unknown task {task_id!r}: use one of {sorted(REAL_TASKS)} or "
        f"synth_<family>_s<seed> with a family in {sorted(SYNTHETIC_FAMILIES)}"
    )
