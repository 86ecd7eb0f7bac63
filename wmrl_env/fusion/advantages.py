"""Group-relative advantages (GRPO) with a choice of scaling.

``A = x - mean_group(x)``, then scaled:

* ``"batch"`` (default): divided by one batch-level standard deviation of the centred values.
  A single scalar keeps the relative size of groups intact, so fusion weights and the
  PPI linearity survive the scaling.
* ``"group"``: divided by each group's own standard deviation (classic GRPO), that of
  ``scale_from`` where given (the natural rewards, so that a world model's weight or a
  fusion weight folded into ``rewards`` is not divided out again).
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
    rewards: np.ndarray,
    groups: GroupIndex,
    scaling: AdvantageScaling = "batch",
    scale_from: np.ndarray | None = None,
) -> np.ndarray:
    """Centre ``rewards`` within groups and scale; NaN rewards give 0.

    ``scale_from``: the rewards whose centred standard deviation (batch or per group) sets
    the scale, when it should not be that of ``rewards`` themselves — PPI's anchor rewards
    are scaled by ``1 / pi`` and would dominate it, and ``wmrl``'s shrunk world-model
    groups divided by their own spread would lose the shrinkage.

    >>> groups = GroupIndex.from_ids([0, 0, 1, 1])
    >>> group_advantages(np.array([10.0, -10.0, 1.0, -1.0]), groups,
    ...                  scale_from=np.array([1.0, -1.0, 1.0, -1.0])).round(2).tolist()
    [8.66, -8.66, 0.87, -0.87]
    """
    if scaling not in SCALINGS:
        raise ValueError(f"scaling must be one of {SCALINGS}, got {scaling!r}")
    valid = ~np.isnan(rewards)
    centred = groups.centre(rewards, valid)
    if scaling == "none":
        return centred
    if scale_from is None:
        source, source_valid = centred, valid
    else:
        source_valid = ~np.isnan(scale_from)
        source = groups.centre(scale_from, source_valid)
    if scaling == "batch":
        n_valid = int(source_valid.sum())
        std = float(np.sqrt(np.sum(source**2) / max(n_valid - 1, 1)))
        return centred / std if std > EPSILON else centred
    counts = groups.count(source_valid)
    with np.errstate(invalid="ignore", divide="ignore"):
        group_var = groups.sum(source**2) / np.maximum(counts - 1, 1)
    group_std = np.sqrt(group_var)
    scale = np.where(group_std > EPSILON, group_std, 1.0)
    return centred / groups.broadcast(scale)
