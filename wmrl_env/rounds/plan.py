"""What an anchored round decides before anything runs: how anchors are chosen
(:class:`AnchorSelection`), which outcomes are known without execution
(:func:`known_outcomes`), and the plan itself (:class:`RoundPlan`): which samples to execute
and the exact probability each had of being executed."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from wmrl_env.fusion.groups import GroupIndex
from wmrl_env.fusion.screening import SCREENINGS
from wmrl_env.sandboxes.pregate import PreGate

__all__ = [
    "ANCHOR_PRIORITIES",
    "ONE_EXECUTED_MEMBER",
    "AnchorSelection",
    "RoundPlan",
    "check_known_failure",
    "known_outcomes",
]

ANCHOR_PRIORITIES: tuple[str, ...] = ("uniform", "uncertainty", "ucb")

ONE_EXECUTED_MEMBER = (
    "one executed member per anchor group gives 'wmrl' no real comparison within a group: its "
    "evidence gate never gains evidence, the world model's weight stays 0 and every advantage "
    "is 0, so nothing is learned"
)
"""Why screening down to one member is refused under ``wmrl`` with its evidence gate."""


@dataclass
class AnchorSelection:
    """How a round picks what to execute from the world model's prediction.

    Attributes:
        priority: ``"uniform"`` (a simple random sample of groups), ``"uncertainty"``
            (groups likelier by the world model's std,
            :func:`~wmrl_env.fusion.uncertainty_priorities`) or ``"ucb"`` (by how far their
            upper bound rises above ``reference``, :func:`~wmrl_env.fusion.ucb_priorities`).
        ucb_kappa: the std's multiple in the upper bound ``s + ucb_kappa * std``.
        reference: per sample, the best real score of its context so far (NaN: none).
        execute_per_group: screening: execute only this many members of each anchor group
            (``None``: whole groups).
        screening: ``"pps"`` (unbiased) or ``"top"``, see :mod:`~wmrl_env.fusion.screening`.
        rng: the screening draw's generator.
        uniform_mix: the share of uniform in screening's ``pps`` draw (``None``: the
            fusion's ``uniform_mix``).
    """

    priority: str = "uniform"
    ucb_kappa: float = 1.0
    reference: np.ndarray | None = None
    execute_per_group: int | None = None
    screening: str = "pps"
    rng: np.random.Generator | None = None
    uniform_mix: float | None = None

    def __post_init__(self) -> None:
        if self.priority not in ANCHOR_PRIORITIES:
            raise ValueError(
                f"anchor_priority must be one of {ANCHOR_PRIORITIES}, got {self.priority!r}"
            )
        if self.screening not in SCREENINGS:
            raise ValueError(f"screening must be one of {SCREENINGS}, got {self.screening!r}")
        keep = self.execute_per_group
        integer = isinstance(keep, int | np.integer) and not isinstance(keep, bool)
        if keep is not None and not (integer and keep >= 1):
            raise ValueError(f"execute_per_group must be an int >= 1 or None, got {keep!r}")
        if self.rng is None:
            self.rng = np.random.default_rng()

    @property
    def needs_prediction(self) -> bool:
        """Whether the draw or the screening reads this round's prediction."""
        return self.priority != "uniform" or self.execute_per_group is not None


def known_outcomes(
    known_failure: Callable[[Any], bool] | None, artifacts: Sequence[Any]
) -> tuple[np.ndarray, np.ndarray]:
    """Per sample: whether its outcome is known to be a failure without running it, and its
    status where the predicate tells one (a :class:`~wmrl_env.sandboxes.pregate.PreGate`
    answers a whole batch with statuses; a plain predicate gives ``"failed"``).

    >>> known, status = known_outcomes(lambda a: a == "x", ["x", "y"])
    >>> known.tolist(), status.tolist()
    ([True, False], ['failed', ''])
    """
    n = len(artifacts)
    if known_failure is None:
        return np.zeros(n, dtype=bool), np.full(n, "", dtype=object)
    if isinstance(known_failure, PreGate):
        answer = known_failure.answer(artifacts)
        return answer.known, answer.status.astype(object)
    known = np.array([bool(known_failure(a)) for a in artifacts], dtype=bool)
    return known, np.where(known, "failed", "").astype(object)


def check_known_failure(known_failure: Any, kind: str, failure_score: float) -> None:
    """Refuse a ``known_failure`` predicate that cannot work: it needs an outcome task (the
    action is the artifact) and a finite ``failure_score`` to score known failures with."""
    if known_failure is not None and kind != "outcome":
        raise ValueError("known_failure needs an outcome task (an action is the artifact)")
    if known_failure is not None and math.isnan(failure_score):
        raise ValueError("known_failure needs a failure_score (or score_range) to score with")


@dataclass(frozen=True)
class RoundPlan:
    """What a round executes, per sample (``group_ids`` order).

    Attributes:
        group_ids: each sample's group.
        drawn: its group was drawn by the random draw.
        anchors: its group is an anchor: drawn, or forced (``pi = 1``) because it holds an
            invalid prediction whose outcome is not known.
        execute: it runs for real: an anchor's member, not screened out, outcome not known.
        known: its outcome is known without execution (it is never executed).
        known_status: the known outcome's status (``""`` elsewhere).
        inclusion: its probability of being executed (group's ``pi`` times the member's
            given the group; 1 for a forced group; 0 for a group never anchored).
        known_scores: the known outcomes' scores (NaN elsewhere); ``None``: the round's
            ``failure_score`` for every known outcome.
        decided_outside: the draw was decided outside the fusion (the adapter's own draw,
            or per sample at reward time), so :meth:`~wmrl_env.rounds.AnchoredRound.finish`
            hands the fusion ``inclusion`` and the screened members itself.
    """

    group_ids: np.ndarray
    drawn: np.ndarray
    anchors: np.ndarray
    execute: np.ndarray
    known: np.ndarray
    known_status: np.ndarray
    inclusion: np.ndarray
    known_scores: np.ndarray | None = None
    decided_outside: bool = False

    @property
    def forced(self) -> np.ndarray:
        """Per sample: its group was forced, not drawn."""
        return self.anchors & ~self.drawn

    @property
    def screened(self) -> np.ndarray:
        """Per sample: a member of an anchor group left unexecuted by screening."""
        return self.anchors & ~self.execute & ~self.known

    @property
    def n_forced_groups(self) -> int:
        """The groups anchored without being drawn (forced by an invalid prediction)."""
        return int(GroupIndex.from_ids(self.group_ids).count(self.forced).astype(bool).sum())
