"""The anchored round: one engine behind every integration (the vector env's outcome and
multi-step rounds, the single-env wrapper, TRL's reward).

A round runs in three moves:

1. **plan** (:meth:`AnchoredRound.plan`): from the world model's prediction for a batch of
   groups, the fusion draws anchor groups (uniformly, or with priorities from the world
   model's std or upper bound), screening keeps ``execute_per_group`` members of each anchor
   group, every group holding an invalid prediction is *forced* (executed whole, ``pi = 1``)
   unless that sample's outcome is *known* without execution (a program known to fail: never
   executed, scored ``failure_score``). The :class:`~wmrl_env.rounds.plan.RoundPlan` says
   what to execute and each sample's exact probability of execution.
2. **execute**: the adapter runs ``plan.execute`` its own way (a vector of gym envs, an
   executor's batch, one env step by step) and folds each result into the round's
   :class:`~wmrl_env.rounds.record.RealRecord` (:meth:`AnchoredRound.record`), which tells
   the circuit breaker of every execution.
3. **finish** (:meth:`AnchoredRound.finish`): the fusion turns the world-model scores, the
   real scores and the known outcomes into rewards and advantages (with the groups' tasks
   as the gate's clusters and the world model's std), and the round's metrics come back
   under the names in :data:`ROUND_METRICS` plus the fusion's own.

What every adapter gets from it: PPI's fused reward has each sample's real outcome as its
expectation over the draw (drawn, forced, screened, known); a known outcome is never
executed, screening included; infrastructure failures in a row raise
:class:`~wmrl_env.rounds.InfrastructureFailureError` after ``max_infrastructure_failures``.

Example:
    >>> import numpy as np
    >>> from wmrl_env.executors.base import ExecResult, ExecStatus
    >>> from wmrl_env.fusion import RewardFusion
    >>> from wmrl_env.world_models.base import Prediction
    >>> engine = AnchoredRound(RewardFusion(method="ppi", anchor_fraction=0.5, seed=0),
    ...                        failure_score=0.0)
    >>> ids = np.repeat([0, 1], 2)
    >>> prediction = Prediction(np.array([0.5, np.nan, 0.4, 0.6]),
    ...                         valid=np.array([True, False, True, True]))
    >>> plan = engine.plan(ids, prediction)
    >>> plan.anchors[:2].tolist(), plan.inclusion[:2].tolist()  # the invalid group: forced
    ([True, True], [1.0, 1.0])
    >>> record = engine.record(len(ids))
    >>> todo = np.flatnonzero(plan.execute)
    >>> record.add_all(todo, [ExecResult("j", ExecStatus.OK, score=0.5) for _ in todo])
    >>> done = engine.finish(plan, record, prediction)
    >>> sorted(set(ROUND_METRICS) - set(done.metrics))
    []
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np

from wmrl_env.fusion import (
    RewardFusion,
    screen_members,
    ucb_priorities,
    uncertainty_priorities,
)
from wmrl_env.fusion.groups import GroupIndex
from wmrl_env.rounds.finish import ROUND_METRICS, FinishedRound, finish_round, prediction_valid
from wmrl_env.rounds.health import DEFAULT_MAX_INFRASTRUCTURE_FAILURES, InfrastructureHealth
from wmrl_env.rounds.outside import plan_from_fates, plan_with_inclusion
from wmrl_env.rounds.plan import ONE_EXECUTED_MEMBER, AnchorSelection, RoundPlan
from wmrl_env.rounds.record import RealRecord
from wmrl_env.world_models.base import Prediction

__all__ = ["ROUND_METRICS", "AnchoredRound"]  # ROUND_METRICS: for the example above


class AnchoredRound:
    """Plans and finishes anchored rounds for one run (see the module docstring).

    Args:
        fusion: the :class:`~wmrl_env.fusion.RewardFusion` that draws, records and fuses.
        failure_score: a failed program's real score, also a known failure's (NaN: program
            failures are left out like infrastructure ones).
        selection: how anchors are drawn and screened (:class:`AnchorSelection`).
        health: the circuit breaker; default one of ``max_infrastructure_failures``.
        max_infrastructure_failures: infrastructure failures in a row before a round raises
            (0: never); used when ``health`` is not given.
    """

    def __init__(
        self,
        fusion: RewardFusion,
        *,
        failure_score: float = math.nan,
        selection: AnchorSelection | None = None,
        health: InfrastructureHealth | None = None,
        max_infrastructure_failures: int = DEFAULT_MAX_INFRASTRUCTURE_FAILURES,
    ) -> None:
        self.fusion = fusion
        self.failure_score = float(failure_score)
        self.selection = selection if selection is not None else AnchorSelection()
        self.health = (
            health if health is not None else InfrastructureHealth(max_infrastructure_failures)
        )
        screens_top = self.selection.screening == "top" and self.selection.execute_per_group
        if screens_top and getattr(fusion, "method", None) == "ppi":
            raise ValueError(
                "screening='top' cannot be used with method 'ppi': members left out with "
                "probability 0 have no unbiased correction; use screening='pps'"
            )
        gated_wmrl = getattr(fusion, "method", None) == "wmrl" and (
            getattr(fusion, "wm_gate", None) == "evidence"
        )
        if self.selection.execute_per_group == 1 and gated_wmrl:
            raise ValueError(
                f"execute_per_group=1 cannot be used with method 'wmrl': {ONE_EXECUTED_MEMBER}; "
                "execute at least 2 members of each anchor group, or use 'debias', 'denoise' "
                "or 'ppi'"
            )

    # -- plan -------------------------------------------------------------------------------

    def draw(
        self,
        group_ids: Sequence[Any] | np.ndarray,
        prediction: Prediction | None = None,
        known: np.ndarray | None = None,
        priorities: np.ndarray | None = None,
    ) -> np.ndarray:
        """Start a round: the fusion draws anchor groups; per sample, its group drawn.

        ``priorities`` (per sample, constant within a group) override the selection's;
        ``"uncertainty"`` and ``"ucb"`` read ``prediction`` (samples in ``known`` add
        nothing to a group's priority)."""
        ids = np.asarray(group_ids)
        if priorities is None and self.selection.priority != "uniform":
            priorities = self._priorities(ids, prediction, known)
        return np.asarray(self.fusion.select_anchors(ids, priorities), dtype=bool)

    def plan(
        self,
        group_ids: Sequence[Any] | np.ndarray,
        prediction: Prediction | None,
        known: np.ndarray | None = None,
        known_status: np.ndarray | None = None,
        *,
        drawn: np.ndarray | None = None,
        inclusion: np.ndarray | None = None,
    ) -> RoundPlan:
        """Plan a round from ``prediction`` (``None``: none yet, nothing is forced).

        ``drawn``: the anchors of a round already started with :meth:`draw` (else drawn
        here); screening and forcing follow (module docstring). ``inclusion`` (per sample,
        with ``drawn``): the drawn groups came from the adapter's own draw, with these exact
        inclusion probabilities, not from the fusion's; screening (with the selection's
        generator) and forcing follow as for a fusion's draw."""
        ids = np.asarray(group_ids)
        n = ids.shape[0]
        known = np.zeros(n, dtype=bool) if known is None else np.asarray(known, dtype=bool)
        if known.shape != (n,):
            raise ValueError(f"known must be a bool mask of shape ({n},), got {known.shape}")
        if known.any() and math.isnan(self.failure_score):
            raise ValueError("known outcomes need a failure_score to score them with")
        if known_status is None:
            known_status = np.where(known, "failed", "").astype(object)
        invalid = np.zeros(n, dtype=bool) if prediction is None else ~prediction_valid(prediction)
        if inclusion is not None:
            if drawn is None:
                raise ValueError("inclusion probabilities need the draw they belong to: drawn")
            screen = None
            if self.selection.execute_per_group is not None and prediction is not None:
                screen = partial(self._screen_members, ids, prediction, known)
            return plan_with_inclusion(ids, invalid, known, known_status, drawn, inclusion, screen)
        if drawn is None:
            drawn = self.draw(ids, prediction, known)
        drawn = np.asarray(drawn, dtype=bool)
        execute = drawn & ~known
        if self.selection.execute_per_group is not None and prediction is not None:
            execute = self._screen(ids, prediction, known)
        plan = RoundPlan(ids, drawn, drawn.copy(), execute, known, known_status, np.zeros(n))
        return self.force(plan, invalid)

    def plan_from(
        self,
        group_ids: Sequence[Any] | np.ndarray,
        drawn: np.ndarray,
        executed: np.ndarray,
        inclusion: np.ndarray,
        known_scores: np.ndarray | None = None,
    ) -> RoundPlan:
        """The plan of a round whose samples' fates were decided one by one outside the
        fusion (verl's reward workers score each sample alone): per sample, its group was
        ``drawn``; it was ``executed`` as evidence (an anchor) with probability
        ``inclusion`` (read for every sample of an anchor group); ``known_scores`` holds
        the outcomes known without a drawn execution (NaN elsewhere;
        :func:`~wmrl_env.rounds.sample_outcome` says which)."""
        return plan_from_fates(np.asarray(group_ids), drawn, executed, inclusion, known_scores)

    def force(self, plan: RoundPlan, invalid: np.ndarray) -> RoundPlan:
        """Anchor with certainty (``pi = 1``, executed whole) every group holding an
        ``invalid`` sample whose outcome is not known; the plan with the new executions."""
        groups = GroupIndex.from_ids(plan.group_ids)
        unknown_invalid = np.asarray(invalid, dtype=bool) & ~plan.known
        anchors = plan.anchors
        execute = plan.execute
        if unknown_invalid.any():
            anchors = np.asarray(self.fusion.force_anchors(unknown_invalid), dtype=bool)
            whole = groups.broadcast(groups.count(unknown_invalid) > 0)
            execute = execute | (whole & ~plan.known)
        inclusion = self.fusion.inclusion_probabilities
        inclusion = np.zeros(len(execute)) if inclusion is None else inclusion
        return RoundPlan(
            plan.group_ids, plan.drawn, anchors, execute, plan.known, plan.known_status, inclusion
        )

    def _priorities(
        self, ids: np.ndarray, prediction: Prediction | None, known: np.ndarray | None
    ) -> np.ndarray:
        selection = self.selection
        if prediction is None:
            raise ValueError(f"anchor_priority={selection.priority!r} needs a prediction")
        if selection.priority == "ucb":
            scores = np.where(prediction_valid(prediction), prediction.scores, np.nan)
            return ucb_priorities(
                ids, scores, prediction.std, selection.ucb_kappa, selection.reference, known=known
            )
        if prediction.std is None:
            raise ValueError(
                "anchor_priority='uncertainty' needs a world model that returns a std "
                "(predict -> (scores, std) or a Prediction with std)"
            )
        return uncertainty_priorities(ids, prediction.std, known=known)

    def _screen(self, ids: np.ndarray, prediction: Prediction, known: np.ndarray) -> np.ndarray:
        """``execute_per_group`` members of each anchor group, by their upper bound
        ``s + ucb_kappa * std`` (a group with an invalid prediction is executed whole; known
        outcomes are never chosen); the fusion records each member's probability."""
        executed, member_pi = self._screen_members(ids, prediction, known)
        return np.asarray(self.fusion.screen_anchors(executed, member_pi, known=known), dtype=bool)

    def _screen_members(
        self, ids: np.ndarray, prediction: Prediction, known: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        selection = self.selection
        std = np.zeros(len(prediction)) if prediction.std is None else prediction.std
        upper = np.where(
            prediction_valid(prediction), prediction.scores + selection.ucb_kappa * std, np.nan
        )
        mix = self.fusion.uniform_mix if selection.uniform_mix is None else selection.uniform_mix
        return screen_members(
            ids,
            upper,
            selection.execute_per_group,
            selection.rng,
            selection.screening,
            mix,
            known=known,
        )

    # -- execute ----------------------------------------------------------------------------

    def record(self, num_samples: int) -> RealRecord:
        """An empty real record for a round of ``num_samples``, wired to the breaker."""
        return RealRecord(num_samples, self.failure_score, self.health)

    # -- finish -----------------------------------------------------------------------------

    def finish(
        self,
        plan: RoundPlan,
        record: RealRecord,
        prediction: Prediction | None,
        clusters: Sequence[Any] | np.ndarray | None = None,
    ) -> FinishedRound:
        """Fuse the round with the groups' tasks as ``clusters`` (per sample):
        :func:`~wmrl_env.rounds.finish.finish_round` with this round's fusion and
        ``failure_score``."""
        return finish_round(self.fusion, plan, record, prediction, clusters, self.failure_score)
