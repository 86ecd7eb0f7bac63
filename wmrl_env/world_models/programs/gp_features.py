"""The program features the task-local Gaussian process reads, and their length-scale blocks.

World model v2's per-task GP measures distances on these standardised program features; v3
places a program relative to its grid on the same ones, so v2's kernel can stand in for v3's
covariance. Hash buckets and line counts are left out: they carry no distance.

Example:
    >>> len(GP_COLUMNS) == len(GP_BLOCKS), sorted(set(GP_BLOCKS.tolist()))
    (True, [0, 1, 2, 3])
"""

from __future__ import annotations

import numpy as np

from wmrl_env.world_models.programs.program_features import PROGRAM_FEATURE_NAMES

__all__ = ["GP_BLOCKS", "GP_COLUMNS"]

GP_COLUMNS = np.array(
    [
        i
        for i, name in enumerate(PROGRAM_FEATURE_NAMES)
        if not name.startswith(("name_hash", "log_lines"))
    ]
)
"""Indices into ``PROGRAM_FEATURE_NAMES`` of the features the GP measures distances on."""


def _block(name: str) -> int:
    if name.startswith(("family_", "is_")):
        return 0
    if name.startswith("log_") or name == "max_depth_unbounded":
        return 1
    if name in ("imputes", "scales", "log1p", "log1p_before_impute", "poly_degree", "pca"):
        return 2
    return 3


GP_BLOCKS = np.array([_block(PROGRAM_FEATURE_NAMES[i]) for i in GP_COLUMNS])
"""Length-scale block of each of ``GP_COLUMNS``: model family, hyperparameters,
preprocessing, the rest."""
