"""Turning (context, artifact) items into text, and checking a batch's shape.

Text backends (sentence encoders, language models) read strings. Contexts and artifacts may
be anything a task produces: strings pass through, mappings and lists become canonical JSON
(sorted keys, so equal objects give equal text and equal cache keys), anything else ``str()``.

Example:
    >>> as_text({"b": 1, "a": [1, 2]})
    '{"a": [1, 2], "b": 1}'
    >>> len(text_key("print(1)"))
    32
    >>> check_batch(["task"], ["x = 1", "x = 2"])
    Traceback (most recent call last):
    ...
    ValueError: got 1 contexts but 2 artifacts: one context per artifact is needed
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "as_text",
    "check_batch",
    "check_real_scores",
    "forget_task",
    "group_indices",
    "text_key",
]


def as_text(item: Any) -> str:
    """The text a backend reads for one context or artifact."""
    if isinstance(item, str):
        return item
    if isinstance(item, bytes):
        return item.decode("utf-8", errors="replace")
    if isinstance(item, Mapping | list | tuple):
        return json.dumps(item, sort_keys=True, default=str, ensure_ascii=False)
    return str(item)


def text_key(text: str) -> str:
    """A short, stable hash of ``text`` (BLAKE2b, 128 bits), used as a cache key."""
    return hashlib.blake2b(text.encode("utf-8", errors="surrogatepass"), digest_size=16).hexdigest()


def group_indices(keys: Sequence[str]) -> dict[str, np.ndarray]:
    """The positions of each distinct key, in order of first appearance (one pass).

    >>> {k: v.tolist() for k, v in group_indices(["a", "b", "a"]).items()}
    {'a': [0, 2], 'b': [1]}
    """
    groups: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        groups.setdefault(key, []).append(i)
    return {key: np.array(members) for key, members in groups.items()}


def check_batch(contexts: Sequence[Any], artifacts: Sequence[Any]) -> tuple[list[str], list[str]]:
    """Return both sides as lists of text; ``ValueError`` when the lengths differ.

    A bare string passed as the whole batch is refused: it is almost always a forgotten list.
    """
    for name, value in (("contexts", contexts), ("artifacts", artifacts)):
        if isinstance(value, str | bytes):
            raise TypeError(
                f"{name} must be a sequence of items, got a single {type(value).__name__}"
            )
    contexts, artifacts = list(contexts), list(artifacts)
    if len(contexts) != len(artifacts):
        raise ValueError(
            f"got {len(contexts)} contexts but {len(artifacts)} artifacts: "
            "one context per artifact is needed"
        )
    return [as_text(c) for c in contexts], [as_text(a) for a in artifacts]


def check_real_scores(
    real_scores: Any, n: int, score_range: tuple[float, float] | None
) -> tuple[np.ndarray, np.ndarray]:
    """Real scores to learn from, and the mask of those that carry a score.

    NaN marks a failed execution (no score: masked out); a wrong length, infinity or a score
    outside ``score_range`` raises ``ValueError``, so a caller can check before changing
    anything.

    >>> check_real_scores([0.5, float("nan")], 2, (0.0, 1.0))[1].tolist()
    [True, False]
    """
    real = np.asarray(real_scores, dtype=np.float64).reshape(-1)
    if real.shape[0] != n:
        raise ValueError(f"got {real.shape[0]} real scores for {n} items")
    keep = ~np.isnan(real)
    scores = real[keep]
    if not np.isfinite(scores).all():
        raise ValueError("real scores must be finite (NaN marks a failed execution)")
    if score_range is not None:
        outside = (scores < score_range[0]) | (scores > score_range[1])
        if outside.any():
            raise ValueError(
                f"{int(outside.sum())} real scores lie outside score_range {score_range}, "
                f"e.g. {scores[outside][:3].tolist()}"
            )
    return real, keep


def forget_task(context: Any | None, *stores: dict) -> None:
    """Drop one task's entries (keyed by its context's :func:`text_key`) from each of an
    online world model's per-task ``stores``; every entry when ``context`` is None."""
    for store in stores:
        if context is None:
            store.clear()
        else:
            store.pop(text_key(as_text(context)), None)
