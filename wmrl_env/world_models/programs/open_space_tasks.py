"""Task meta-features of the open-space world model, read from a task's context.

A context names its task on its first line (``Task <id>: ...``). For a task of the second
suite (generated ``hr_<family>_s<seed>``, real-data ``rd_<name>``) or of the first suite's
registry whose description is exactly this text, the features are computed from its public
train rows (:func:`~wmrl_env.envs.ml_tasks.features.train_features`: size, kind,
missingness, skew, landmarks; never a validation or private label); any other context gets
what its words say (:func:`~wmrl_env.envs.ml_tasks.features.context_features`, NaN where
silent). The model
reads the subset :data:`TASK_COLUMNS`; results are cached per context.

Example:
    >>> from wmrl_env.envs.ml_tasks.headroom import headroom_task
    >>> x = task_vector(headroom_task("hr_missing_s1").description)
    >>> x.shape == (len(TASK_COLUMNS),), bool(x[TASK_COLUMNS.index("missing_share")] > 0)
    (True, True)
"""

from __future__ import annotations

import functools
import re
from typing import Any

import numpy as np

from wmrl_env.envs.ml_tasks.features import LANDMARKS

__all__ = ["TASK_COLUMNS", "task_vector"]

TASK_COLUMNS: tuple[str, ...] = (
    "log_rows",
    "log_columns",
    "kind_binary",
    "kind_multiclass",
    "kind_regression",
    "minority_share",
    "missing_share",
    "columns_with_missing_share",
    "median_abs_skew",
    "max_abs_skew",
    "negative_columns_share",
    "categorical_columns_share",
    "log_scale_spread",
    *LANDMARKS,
)
"""The task features the model reads (names of :data:`~wmrl_env.envs.ml_tasks.features.
TASK_FEATURE_NAMES`)."""
_TASK_LINE = re.compile(r"Task (?P<task_id>[A-Za-z0-9_]+):")


@functools.lru_cache(maxsize=4096)
def _vector(text: str) -> np.ndarray:
    from wmrl_env.envs.ml_tasks.features import TASK_FEATURE_NAMES, context_features

    full = None
    match = _TASK_LINE.match(text)
    if match:
        full = _generated_task_features(match["task_id"], text)
    if full is None:
        full = context_features(text)
    index = [TASK_FEATURE_NAMES.index(name) for name in TASK_COLUMNS]
    out = np.asarray(full, dtype=np.float64)[index]
    out.setflags(write=False)
    return out


def _generated_task_features(task_id: str, text: str) -> np.ndarray | None:
    from wmrl_env.envs.ml_tasks.features import train_features
    from wmrl_env.envs.ml_tasks.pool_tasks import is_private_test_id, private_test_task
    from wmrl_env.envs.ml_tasks.registry import get_task, manifest_entry

    try:
        if is_private_test_id(task_id):
            task = private_test_task(task_id)
        else:
            manifest_entry(task_id)  # a listed task of the first suite, or ValueError
            task = get_task(task_id)
    except (ValueError, KeyError, ImportError, OSError):  # not a task this install can build
        return None
    if task.description != text:
        return None
    return train_features(task.X_train, task.y_train, task.kind, task.metric)


def task_vector(context: Any) -> np.ndarray:
    """The :data:`TASK_COLUMNS` of a context (a description, or anything with one)."""
    text = getattr(context, "description", context)
    return _vector(str(text)).copy()
