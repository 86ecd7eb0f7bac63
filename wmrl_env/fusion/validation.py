"""Checking one step's input: arrays, failures, known outcomes, screening, inclusion.

:func:`validate_step` turns what :meth:`~wmrl_env.fusion.RewardFusion.step` was given into a
:class:`Batch`, or raises a ``ValueError`` that names the problem; it reads the round's
:class:`~wmrl_env.fusion.selection.AnchorRecord` for the inclusion probabilities and the
screening, and changes nothing. The rules it holds a step to:

Failed real executions are marked with ``failed`` (their real score is NaN): they leave the
group baseline and get advantage 0. A world-model prediction marked invalid (``wm_valid``)
must belong to an anchored group, whose rewards come from real execution, or have a known
outcome.

Failures: a program's own failure (crash, timeout, out of memory, invalid output) is
an outcome — pass it as a real score (``failure_score``, e.g. with
:func:`~wmrl_env.executors.outcome_score`); ``failed`` marks *infrastructure*
failures only (the score is unknown: left out of the baseline, advantage 0).

``clusters`` (optional, per trajectory, constant within a group): the task each group
belongs to (e.g. its context or task id); the gate counts a task that recurs across
steps as one cluster. Default: each (step, group) its own cluster.

``wm_std`` (optional, per trajectory): the world model's predictive std, finite and
``>= 0`` wherever the prediction is valid (``ValueError`` otherwise; mark such
predictions ``wm_valid=False``). With ``gate_std="wls"`` the gate also fits the
precision-weighted slope (a diagnostic; see ``RewardFusion``'s ``gate_std``).

``known_scores`` (optional, per trajectory, NaN where unknown): outcomes known without
a real execution drawn at random — e.g. a program that does not parse, which would
certainly fail, at its ``failure_score``. Such a member's reward *is* its known score,
in every method, and its group stays what it is (a world-model group is not forced to
execute); its real score must be NaN and it may have an invalid world-model
prediction. It is no evidence: selected by what is known about it, not by the draw,
it is never a calibration pair and enters neither ``kappa``, nor the gate, nor PPI's
rectification (its reward equals its real outcome for every draw, so PPI stays
unbiased).

Inclusion probabilities come from the round's ``select_anchors`` / ``force_anchors`` (a
group with real scores that was neither drawn nor forced is an error); without a round,
from ``inclusion_probabilities`` (anchors drawn by the caller), else uniform ``m / M`` (a
simple random sample of groups).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from wmrl_env.fusion.advantages import SCALINGS
from wmrl_env.fusion.groups import GroupIndex
from wmrl_env.fusion.selection import AnchorRecord

METHODS: tuple[str, ...] = ("real", "wm", "debias", "denoise", "wmrl", "ppi")
GATES: tuple[str, ...] = ("evidence", "off")
GATE_STDS: tuple[str, ...] = ("wls", "ignore")
GATE_SCOPES: tuple[str, ...] = ("pooled", "cluster")
CALIBRATED_METHODS = ("debias", "wmrl", "ppi")
WEIGHTED_METHODS = ("denoise", "wmrl")
GATED_METHODS = ("wmrl", "ppi")  # the world model's weight is gated by the anchors' evidence
# the methods whose rewards use the world model: only they can be hacked through it
MONITORED_METHODS = tuple(method for method in METHODS if method != "real")


@dataclass(frozen=True)
class Batch:
    """A validated step input: per trajectory unless said otherwise."""

    groups: GroupIndex
    wm: np.ndarray | None
    real: np.ndarray
    failed: np.ndarray
    wm_valid: np.ndarray
    is_anchor: np.ndarray
    pi: np.ndarray
    clusters: np.ndarray | None = None
    screened: np.ndarray | None = None
    wm_std: np.ndarray | None = None
    known_scores: np.ndarray | None = None  # per trajectory: outcomes known without a draw


def check_options(
    method: str,
    anchor_fraction: float,
    min_anchor_groups: int,
    advantage_scaling: str,
    wm_gate: str,
    gate_std: str,
    gate_scope: str = "pooled",
) -> None:
    """``ValueError`` for a :class:`~wmrl_env.fusion.RewardFusion` option out of range."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if not 0.0 <= anchor_fraction <= 1.0:
        raise ValueError(f"anchor_fraction must be in [0, 1], got {anchor_fraction}")
    if min_anchor_groups < 0:
        raise ValueError(f"min_anchor_groups must be >= 0, got {min_anchor_groups}")
    if advantage_scaling not in SCALINGS:
        raise ValueError(f"advantage_scaling must be one of {SCALINGS}")
    if method == "ppi" and advantage_scaling == "group":
        raise ValueError(
            "advantage_scaling='group' cannot be used with method 'ppi': dividing each group "
            "by its own standard deviation undoes the 1/pi rectification (the advantages' "
            "expectation over the anchor draw is no longer the all-real one); use 'batch' "
            "(one scalar, PPI-safe) or 'none'"
        )
    if wm_gate not in GATES:
        raise ValueError(f"wm_gate must be one of {GATES}, got {wm_gate!r}")
    if gate_std not in GATE_STDS:
        raise ValueError(f"gate_std must be one of {GATE_STDS}, got {gate_std!r}")
    if gate_scope not in GATE_SCOPES:
        raise ValueError(f"gate_scope must be one of {GATE_SCOPES}, got {gate_scope!r}")


def per_group_priorities(groups: GroupIndex, priorities: np.ndarray | None) -> np.ndarray | None:
    """Per-trajectory anchor priorities (constant within each group) as one per group."""
    if priorities is None:
        return None
    per_trajectory = np.asarray(priorities, dtype=np.float64)
    check_length("group_priorities", per_trajectory, groups.inverse.size)
    per_group = groups.mean(per_trajectory)
    if not np.allclose(groups.broadcast(per_group), per_trajectory):
        raise ValueError("group_priorities must be constant within each group")
    return per_group


def validate_step(
    method: str,
    record: AnchorRecord | None,
    group_ids: Sequence[Any] | np.ndarray,
    wm_scores: np.ndarray | None,
    real_scores: np.ndarray,
    failed: np.ndarray | None,
    wm_valid: np.ndarray | None,
    inclusion_probabilities: np.ndarray | None,
    clusters: Sequence[Any] | np.ndarray | None = None,
    screened: np.ndarray | None = None,
    wm_std: np.ndarray | None = None,
    known_scores: np.ndarray | None = None,
) -> Batch:
    """The checked input of one :meth:`~wmrl_env.fusion.RewardFusion.step` of a fusion
    with ``method`` (arguments as there; ``record``: the round's anchors, if drawn)."""
    groups = GroupIndex.from_ids(group_ids)
    n = groups.inverse.size
    cluster_labels = None
    if clusters is not None:
        labels = list(clusters)
        if len(labels) != n:
            raise ValueError(f"clusters has {len(labels)} entries, expected {n} like group_ids")
        cluster_labels = np.empty(n, dtype=object)
        for i, label in enumerate(labels):
            cluster_labels[i] = label
    real = as_float("real_scores", real_scores, n)
    if np.isinf(real).any():
        raise ValueError(f"real_scores has inf at index {int(np.flatnonzero(np.isinf(real))[0])}")
    failed = as_bool("failed", failed, n, default=False)
    if (failed & ~np.isnan(real)).any():
        index = int(np.flatnonzero(failed & ~np.isnan(real))[0])
        raise ValueError(f"trajectory {index} is marked failed but has a real score")
    known = np.full(n, np.nan)
    if known_scores is not None:
        known = as_float("known_scores", known_scores, n)
        if np.isinf(known).any():
            raise ValueError(
                f"known_scores has inf at index {int(np.flatnonzero(np.isinf(known))[0])}"
            )
    is_known = ~np.isnan(known)
    both = is_known & (~np.isnan(real) | failed)
    if both.any():
        raise ValueError(
            f"trajectory {int(np.flatnonzero(both)[0])} has a known score and a real score "
            "(or failed=True): pass its outcome once, as one or the other"
        )
    wm_valid = as_bool("wm_valid", wm_valid, n, default=True)
    std = None
    if wm_std is not None:
        std = as_float("wm_std", wm_std, n)
        with np.errstate(invalid="ignore"):
            bad_std = wm_valid & ~(np.isfinite(std) & (std >= 0))
        if bad_std.any():
            raise ValueError(
                f"wm_std has {int(bad_std.sum())} NaN/inf/negative values where the "
                f"prediction is valid (first at index {int(np.flatnonzero(bad_std)[0])}); "
                "mark such predictions with wm_valid=False"
            )
    wm = None
    if wm_scores is None:
        if method != "real":
            raise ValueError(f"method {method!r} needs wm_scores")
    else:
        wm = as_float("wm_scores", wm_scores, n)
        bad = wm_valid & ~np.isfinite(wm)
        if bad.any():
            raise ValueError(
                f"wm_scores has {int(bad.sum())} NaN/inf values (first at index "
                f"{int(np.flatnonzero(bad)[0])}); mark garbage predictions with wm_valid=False"
            )

    executed = ~np.isnan(real) | failed
    screened = _screened(record, screened, n, executed)
    executed_per_group = groups.count(executed)
    anchored = executed_per_group > 0
    partial = anchored & (groups.count(executed | screened | is_known) < groups.sizes)
    if partial.any():
        raise ValueError(
            f"group {groups.ids[np.flatnonzero(partial)[0]]!r} has real scores on some "
            "members and NaN on others; mark failed executions with failed=True (and "
            "members left out by screening with screened=True)"
        )
    is_anchor = groups.broadcast(anchored) & ~screened
    if method == "real" and (~is_anchor & ~is_known).any():
        raise ValueError("method 'real' needs a real score (or failed=True) for every group")
    if method != "real" and (~wm_valid & ~is_anchor & ~is_known).any():
        raise ValueError(
            "a world-model prediction marked invalid (wm_valid=False) is in a group that "
            "was not executed: execute that group for real (or pass its known_scores)"
        )
    all_known = groups.count(is_known) == groups.sizes
    pi = _inclusion(
        method, record, group_ids, groups, anchored, inclusion_probabilities, is_anchor, all_known
    )
    if method == "ppi" and not (pi[screened] > 0).all():
        raise ValueError(
            "ppi needs every member of an anchor group to have a chance of execution: "
            "members screened out with probability 0 (screening='top') leave the group "
            "mean without an unbiased correction; screen with 'pps'"
        )
    return Batch(
        groups,
        wm,
        real,
        failed,
        wm_valid,
        is_anchor,
        pi,
        cluster_labels,
        screened=screened,
        wm_std=std,
        known_scores=known,
    )


def _screened(
    record: AnchorRecord | None, given: np.ndarray | None, n: int, executed: np.ndarray
) -> np.ndarray:
    """Per trajectory, left unexecuted by screening: from the round's record (see
    :meth:`screen_anchors`) or ``given``; such members must have no real score."""
    if given is not None and record is not None:
        raise ValueError(
            "screened was passed, but this round's record holds the screening: use "
            "screen_anchors or the screened argument, not both"
        )
    if given is not None:
        screened = as_bool("screened", given, n, default=False)
    elif record is not None and record.screened.shape == (n,):
        screened = record.screened
    else:
        screened = np.zeros(n, dtype=bool)
    if (screened & executed).any():
        index = int(np.flatnonzero(screened & executed)[0])
        raise ValueError(f"trajectory {index} is marked screened out but has a real score")
    return screened


def _inclusion(
    method: str,
    record: AnchorRecord | None,
    group_ids: Sequence[Any] | np.ndarray,
    groups: GroupIndex,
    anchored: np.ndarray,
    given: np.ndarray | None,
    is_anchor: np.ndarray,
    all_known: np.ndarray,
) -> np.ndarray:
    """Per-trajectory inclusion probability of each anchored group (see :meth:`step`);
    under screening, of each member (``is_anchor``: the members executed)."""
    n = groups.inverse.size
    if given is not None:
        if record is not None:
            raise ValueError(
                "inclusion_probabilities were passed, but select_anchors recorded this "
                "round's: use one source (force_anchors for groups executed with certainty)"
            )
        pi = as_float("inclusion_probabilities", given, n)
    elif record is not None:
        if not record.matches(group_ids):
            raise ValueError(
                "group_ids differ from those of the last select_anchors: step() must fuse "
                "the batch whose anchors were drawn"
            )
        unrecorded = anchored & ~record.anchored
        if unrecorded.any():
            raise ValueError(
                f"group {groups.ids[np.flatnonzero(unrecorded)[0]]!r} has real scores but "
                "was neither drawn by select_anchors nor forced: call force_anchors for "
                "groups executed outside the draw"
            )
        if method == "ppi" and (record.anchored & ~anchored & ~all_known).any():
            raise ValueError(
                "a group chosen by select_anchors has no real score: PPI needs every "
                "selected group executed (mark failures with failed=True)"
            )
        pi = record.per_trajectory_pi()
    else:
        pi = np.full(n, int(anchored.sum()) / groups.num_groups)
    anchored_pi = pi[is_anchor]
    if anchored_pi.size and not ((anchored_pi > 0) & (anchored_pi <= 1)).all():
        raise ValueError("inclusion probabilities of anchored groups must be in (0, 1]")
    return pi


def check_length(name: str, array: np.ndarray, n: int) -> None:
    if array.ndim != 1 or array.shape[0] != n:
        raise ValueError(f"{name} has shape {array.shape}, expected ({n},) like group_ids")


def as_float(name: str, values: Any, n: int) -> np.ndarray:
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be numbers: {exc}") from exc
    check_length(name, array, n)
    return array


def as_bool(name: str, values: Any, n: int, default: bool) -> np.ndarray:
    if values is None:
        return np.full(n, default)
    array = np.asarray(values)
    if array.dtype != bool:
        raise ValueError(f"{name} must be a bool array, got dtype {array.dtype}")
    check_length(name, array, n)
    return array
