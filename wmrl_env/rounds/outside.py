"""Plans of rounds whose draw was decided outside the fusion: by the adapter's own draw with
known inclusion probabilities (:func:`plan_with_inclusion`), or sample by sample at reward
time (:func:`plan_from_fates`, verl's reward workers). Either way the plan carries the exact
probability each sample had of being executed, and the fusion is handed it at the finish."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from wmrl_env.fusion.groups import GroupIndex
from wmrl_env.rounds.plan import RoundPlan

__all__ = ["plan_from_fates", "plan_with_inclusion"]


def plan_with_inclusion(
    ids: np.ndarray,
    invalid: np.ndarray,
    known: np.ndarray,
    known_status: np.ndarray,
    drawn: Any,
    inclusion: Any,
    screen: Callable[[], tuple[np.ndarray, np.ndarray]] | None = None,
) -> RoundPlan:
    """The plan of a round whose groups were ``drawn`` by the adapter with ``inclusion``
    (per sample): ``screen`` (when given) picks the drawn groups' members with their
    probabilities given the group; every group holding an ``invalid`` prediction whose
    outcome is not ``known`` is forced (executed whole, ``pi = 1``)."""
    n = ids.shape[0]
    drawn = _mask("drawn", drawn, n)
    pi = _per_sample("inclusion", inclusion, n)
    if not ((pi[drawn] > 0) & (pi[drawn] <= 1)).all():
        raise ValueError("a drawn group needs an inclusion probability in (0, 1]")
    execute, member_pi = drawn & ~known, np.ones(n)
    if screen is not None and drawn.any():
        members, member_pi = screen()
        execute = execute & members
    groups = GroupIndex.from_ids(ids)
    forced = groups.broadcast(groups.count(invalid & ~known) > 0)
    execute = np.where(forced, ~known, execute)
    inclusion = np.where(forced, 1.0, np.where(drawn, pi * member_pi, 0.0))
    return RoundPlan(
        ids,
        drawn,
        drawn | forced,
        execute,
        known,
        known_status,
        inclusion,
        decided_outside=True,
    )


def plan_from_fates(
    ids: np.ndarray,
    drawn: Any,
    executed: Any,
    inclusion: Any,
    known_scores: Any | None = None,
) -> RoundPlan:
    """The plan of a round whose samples' fates were decided one by one (see
    :meth:`~wmrl_env.rounds.AnchoredRound.plan_from`)."""
    n = ids.shape[0]
    drawn, executed = _mask("drawn", drawn, n), _mask("executed", executed, n)
    pi = _per_sample("inclusion", inclusion, n)
    known_scores = (
        np.full(n, np.nan) if known_scores is None else _per_sample("known_scores", known_scores, n)
    )
    known = ~np.isnan(known_scores)
    if (executed & known).any():
        raise ValueError("a sample with a known outcome is marked executed")
    anchors = drawn | executed
    if not ((pi[anchors] > 0) & (pi[anchors] <= 1)).all():
        raise ValueError("an anchor's sample needs an inclusion probability in (0, 1]")
    status = np.where(known, "known", "").astype(object)
    return RoundPlan(
        ids,
        drawn,
        anchors,
        executed,
        known,
        status,
        np.where(anchors, pi, 0.0),
        known_scores,
        decided_outside=True,
    )


def _mask(name: str, values: Any, n: int) -> np.ndarray:
    mask = np.asarray(values)
    if mask.dtype != bool or mask.shape != (n,):
        raise ValueError(
            f"{name} must be a bool mask of shape ({n},), got {mask.dtype} {mask.shape}"
        )
    return mask


def _per_sample(name: str, values: Any, n: int) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.shape != (n,):
        raise ValueError(f"{name} must hold one number per sample ({n},), got {array.shape}")
    return array
