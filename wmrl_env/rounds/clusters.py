"""The task a group belongs to, as the fusion's gate counts it: a task that recurs across
steps is one cluster, so its groups' errors are not read as independent evidence."""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["task_cluster"]


def task_cluster(context: Any) -> str:
    """A short, stable label for a task context (text, chat messages, numbers, or anything
    JSON can write; other objects by their ``repr``): equal contexts, equal labels, in every
    process.

    >>> task_cluster("Sort a list") == task_cluster("Sort a list") != task_cluster("Sum")
    True
    >>> len(task_cluster([{"role": "user", "content": "hi"}]))
    16
    """
    text = (
        context if isinstance(context, str) else json.dumps(context, sort_keys=True, default=repr)
    )
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()
