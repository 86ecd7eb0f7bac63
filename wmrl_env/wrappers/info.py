"""The ``info`` dict of the group env, in gymnasium's vector-info layout.

Per-env values are arrays of length ``num_envs`` with a ``_key`` mask beside them. Batch-level
diagnostics (kappa, calibration metrics, timings) are the same for every env: they live in
``info["batch"]`` as arrays filled with one value, so gymnasium's info tools (e.g.
``DictInfoToList``) keep working; :func:`batch_diagnostics` reads them back as plain numbers.

Example:
    >>> import numpy as np
    >>> info = {}
    >>> add_per_env(info, is_anchor=np.array([True, False]))
    >>> add_batch(info, 2, kappa=1.5, fallback="identity")
    >>> info["_is_anchor"].tolist(), batch_diagnostics(info)
    ([True, True], {'kappa': 1.5, 'fallback': 'identity'})
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["add_batch", "add_per_env", "batch_diagnostics"]


def add_per_env(info: dict[str, Any], **arrays: np.ndarray) -> None:
    """Set per-env arrays (every env has a value) and their ``_key`` masks."""
    for key, values in arrays.items():
        info[key] = values
        info[f"_{key}"] = np.ones(len(values), dtype=bool)


def add_batch(info: dict[str, Any], num_envs: int, **values: Any) -> None:
    """Set batch-level values in ``info["batch"]``, broadcast to one entry per env."""
    batch = info.setdefault("batch", {})
    for key, value in values.items():
        batch[key] = np.full(num_envs, value, dtype=object if value is None else None)


def batch_diagnostics(info: dict[str, Any]) -> dict[str, Any]:
    """The batch-level values of a step's ``info`` as plain Python numbers / strings."""
    return {
        key: values[0].item() if isinstance(values[0], np.generic) else values[0]
        for key, values in info.get("batch", {}).items()
        if not key.startswith("_")
    }
