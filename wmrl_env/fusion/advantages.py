"""Group-relative advantages (GRPO) with a choice of scaling.

``A = x - mean_group(x)``, then scaled:

* ``"batch"`` (default): divided by one batch-level standard deviation of the centred values.
  A single scalar keeps the relative size of groups intact, so fusion weights and the
  PPI linearity survive the scaling.
* ``"group"``: divided by each group's own standard deviation (classic GRPO).
* ``"none"``: left as is.

NaN rewards (failed executions) leave the group baseline and get advantage 0.

Example:
    >>> import numpy as np
    >>> from wmrl_env.fusion.groups import GroupIndex
    >>> groups = GroupIndex.from_ids([0, 0, 1, 1])
    >>> group_advantages(np.array([1.0, 3.0, 5.0, np.nan]), groups, scaling="none").tolist()
    [-1.0, 1.0, 0.0, 0.0]
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from wmrl_env.fusion.groups import GroupIndex

AdvantageScaling = Literal["batch", "group", "none"]
SCALINGS: tuple[str, ...] = ("batch", "group", "none")
EPSILON = 1e-8


def group_advantages(
    rewards: np.ndarray, groups: GroupIndex, scaling: AdvantageScaling = "batch"
) -> np.ndarray:
    """Centre ``rewards`` within groups and scale; NaN rewards give 0."""
    if scaling not in SCALINGS:
        raise ValueError(f"scaling must be one of {SCALINGS}, got {scaling!r}")
    valid = ~np.isnan(rewards)
    centred = groups.centre(rewards, valid)
    if scaling == "none":
        return centred
    if scaling == "batch":
        n_valid = int(valid.sum())
        std = float(np.sqrt(np.sum(centred**2) / max(n_valid - 1, 1)))
        return centred / std if std > EPSILON else centred
    counts = groups.count(valid)
    with np.errstate(invalid="ignore", divide="ignore"):
        group_var = groups.sum(centred**2) / np.maximum(counts - 1, 1)
    group_std = np.sqrt(group_var)
    scale = np.where(group_std > EPSILON, group_std, 1.0)
    return centred / groups.broadcast(scale)
