"""Each method's fused rewards, and the levels they sit at.

:func:`fused_rewards` is the reward ``x`` of every trajectory under a method (the table in
:mod:`~wmrl_env.fusion.reward_fusion`); :func:`natural_rewards` the rewards whose spread sets
the batch scale of the advantages (real on anchors, the world model unshrunk elsewhere);
:func:`at_natural_level` moves ``wmrl``'s world-model groups to their calibrated level.

A group executed only in part (world-model screening) has real scores on its executed
members and predictions on the others. The others sit at the executed members' real level,
``mean r + lam (f - mean f)`` (both means over the executed members, ``f`` the calibrated
score): a shut gate (``lam = 0``) gives them the executed members' mean, so neither their
advantages nor the executed members' depend on the world model's level — its error for a
task moves nothing, and the executed members' advantages are those of the anchors alone.

Example:
    >>> import numpy as np
    >>> from wmrl_env.fusion.groups import GroupIndex
    >>> groups = GroupIndex.from_ids(np.zeros(4, dtype=int))
    >>> executed = np.array([True, True, False, False])
    >>> real = np.array([1.0, 0.0, np.nan, np.nan])
    >>> calibrated = np.array([5.0, 5.0, 6.0, 4.0])  # the world model's level is off by 4.5
    >>> on_executed_level(groups, executed, real, calibrated, 0.0).tolist()
    [0.5, 0.5, 0.5, 0.5]
    >>> on_executed_level(groups, executed, real, calibrated, 0.5).tolist()
    [0.5, 0.5, 1.0, 0.0]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from wmrl_env.fusion.groups import GroupIndex
from wmrl_env.fusion.ppi import rectified_rewards
from wmrl_env.fusion.validation import Batch


def calibrated_scores(
    batch: Batch, calibration: Callable[[np.ndarray], np.ndarray], pair: np.ndarray, fit: Any
) -> tuple[np.ndarray, np.ndarray]:
    """Per trajectory, ``f(s)`` under ``calibration`` (NaN where ``s`` is invalid) and the
    cross-fitted ``f_{-fold}(s)`` of this step's anchor pairs (``fit``, an
    :class:`~wmrl_env.fusion.outputs.AnchorFit`; NaN elsewhere)."""
    calibrated = np.full(batch.real.shape, np.nan)
    if batch.wm is not None:
        calibrated[batch.wm_valid] = calibration(batch.wm[batch.wm_valid])
    cross_fitted = np.full(batch.real.shape, np.nan)
    if fit is not None:
        cross_fitted[pair] = fit.cross_fitted
    return calibrated, cross_fitted


def on_executed_level(
    groups: GroupIndex, executed: np.ndarray, real: np.ndarray, stream: np.ndarray, lam: float
) -> np.ndarray:
    """Per trajectory, ``mean_g r + lam (stream - mean_g stream)``, both means over the
    group's ``executed`` members with a real score and a valid ``stream``; NaN in a group
    without such a member."""
    paired = executed & ~np.isnan(real) & ~np.isnan(stream)
    real_level = groups.broadcast(groups.mean(np.where(paired, real, 0.0), paired))
    stream_level = groups.broadcast(groups.mean(np.where(paired, stream, 0.0), paired))
    return real_level + lam * (stream - stream_level)


def _beside_executed(
    batch: Batch, real: np.ndarray, stream: np.ndarray, lam: float, fallback: np.ndarray
) -> np.ndarray:
    """``fallback``, with the screened members of partly executed groups at the executed
    members' level (:func:`on_executed_level` of ``stream``) where that level is known."""
    if not batch.screened.any():
        return fallback
    moved = on_executed_level(batch.groups, batch.is_anchor, real, stream, lam)
    return np.where(batch.screened & ~np.isnan(moved), moved, fallback)


def fused_rewards(
    method: str, batch: Batch, calibrated: np.ndarray, rectifier: np.ndarray, lam: float
) -> np.ndarray:
    """The reward ``x`` of each trajectory under ``method`` (known outcomes not yet set)."""
    real = np.where(batch.failed, np.nan, batch.real)
    if method == "real":
        return real
    if method == "wm":
        return batch.wm.copy()
    if method == "ppi":
        rewards = rectified_rewards(calibrated, rectifier, real, batch.is_anchor, batch.pi, lam)
        # an anchor whose world-model score is invalid has nothing to rectify with
        return np.where(batch.is_anchor & ~batch.wm_valid, real / batch.pi, rewards)
    wm_stream = batch.wm if method == "denoise" else calibrated
    if method == "wmrl":  # the shrunk prediction lam * f~ (its level set later) ...
        shrunk = lam * wm_stream
        if batch.screened.any():  # ... beside real scores: at the executed members' level
            # (without a paired executed member: at the group's calibrated level)
            groups, valid = batch.groups, ~np.isnan(wm_stream)
            level = groups.broadcast(groups.mean(np.where(valid, wm_stream, 0.0), valid))
            partial = groups.broadcast(groups.count(batch.screened) > 0)
            shrunk = np.where(partial, level + lam * (wm_stream - level), shrunk)
            shrunk = _beside_executed(batch, real, wm_stream, lam, shrunk)
        wm_stream = shrunk
    return np.where(batch.is_anchor, real, wm_stream)


def natural_rewards(method: str, batch: Batch, calibrated: np.ndarray) -> np.ndarray | None:
    """The rewards whose spread sets the batch scale of the advantages: real on anchors, the
    (calibrated) world model elsewhere, screened members at their executed members' level —
    neither ``1 / pi`` nor the gate rescales them, so neither changes the size of a
    world-model group's advantages."""
    if method in ("real", "wm"):
        return None
    real = np.where(batch.failed, np.nan, batch.real)
    wm_stream = batch.wm if method == "denoise" else calibrated
    wm_stream = _beside_executed(batch, real, wm_stream, 1.0, wm_stream)
    return np.where(batch.is_anchor, real, wm_stream)


def at_natural_level(
    rewards: np.ndarray, natural: np.ndarray | None, batch: Batch, members: np.ndarray
) -> np.ndarray:
    """Each world-model group's rewards moved to the level of its natural rewards (the
    calibrated mean), deviations kept: ``wmrl``'s world-model groups get ``mean_g f + lam
    (f - mean_g f)``, so a critic or ``reward_mean`` sees scores on the real scale.
    Group-centred advantages are unchanged. (``ppi`` keeps its rewards, unbiased per
    trajectory over the draw, whose anchor levels swing by ``1 / pi``.) Only ``members``
    (those without a known outcome) are moved, over their own mean; partly executed groups
    are at their executed members' real level already and stay there."""
    if natural is None:
        return rewards
    groups = batch.groups
    members = members & ~groups.broadcast(groups.count(batch.screened) > 0)
    valid = ~np.isnan(rewards) & members
    level = groups.broadcast(groups.mean(natural, ~np.isnan(natural) & members))
    moved = groups.centre(rewards, valid) + level
    return np.where(valid & np.isfinite(level), moved, rewards)
