"""The second suite's task ids, resolved: generated ``hr_<family>_s<seed>`` and real-data
``rd_<name>`` tasks, each a :class:`~.private_test.PrivateTestTask`.

Example:
    >>> private_test_task("hr_missing_s0").kind
    'binary'
    >>> is_private_test_id("rd_ecdat_catsup"), is_private_test_id("iris")
    (True, False)
"""

from __future__ import annotations

from .private_test import PrivateTestTask
from .realdata import REAL_DATA_TASKS

__all__ = ["is_private_test_id", "private_test_task"]


def is_private_test_id(task_id: str) -> bool:
    """Whether the id names a task of the second suite (it need not exist)."""
    return task_id.startswith(("hr_", "rd_"))


def private_test_task(task_id: str, fold: tuple[int, int, int] | None = None) -> PrivateTestTask:
    """The generated or real-data task with this id."""
    if task_id.startswith("hr_"):
        from .headroom import headroom_task

        return headroom_task(task_id, fold=fold)
    if task_id in REAL_DATA_TASKS:
        from .realdata import realdata_task

        return realdata_task(task_id, fold=fold)
    raise ValueError(
        f"not a task with a private test: {task_id!r}; expected hr_<family>_s<seed> or one "
        f"of {sorted(REAL_DATA_TASKS)}"
    )
