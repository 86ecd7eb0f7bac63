"""One round of an outcome task: context -> artifact -> score, in a single step.

Data flow of ``step(actions)``:

1. the anchor groups' members are submitted to the real env (non-blocking: they run while
   the world model works), each starting exactly like its group; with prediction-driven
   anchors (``anchor_priority="uncertainty"`` or ``"ucb"``) the world model predicts first
   and the fusion draws the anchors with priorities from its std
   (:func:`~wmrl_env.fusion.uncertainty_priorities`) or its upper bound
   (:func:`~wmrl_env.fusion.ucb_priorities`); with screening (``execute_per_group``) only
   ``k`` members of each anchor group are submitted, chosen by their upper bound
   (:func:`~wmrl_env.fusion.screen_members`, recorded by ``RewardFusion.screen_anchors``);
2. one batched ``world_model.predict(contexts, artifacts)`` scores every env;
3. groups with an invalid prediction (NaN, inf, out of range) are executed for real too, as
   anchors with inclusion probability 1 (``RewardFusion.force_anchors``), except for members
   known to fail without running (``known_failure``, e.g. the deterministic pre-gate
   :class:`~wmrl_env.sandboxes.pregate.PreGate`): never executed, scored ``failure_score``
   as known outcomes (``info["known_status"]``: the gate's status, where it gives one);
4. the fusion turns world-model and real scores into rewards, weights and advantages.

The world model may learn from the round's real scores (``update``), when it has that method
(:func:`~wmrl_env.world_models.base.learn_from_real_scores`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

import numpy as np

from wmrl_env.executors.base import ExecResult
from wmrl_env.fusion import screen_members, ucb_priorities, uncertainty_priorities
from wmrl_env.sandboxes.pregate import PreGate
from wmrl_env.world_models.base import Prediction, learn_from_real_scores
from wmrl_env.wrappers.info import add_batch, add_per_env
from wmrl_env.wrappers.rounds import Round, RoundSetup, StepOutput
from wmrl_env.wrappers.starts import check_same_starts
from wmrl_env.wrappers.world_model_calls import predict_outcome

__all__ = ["OutcomeRound", "known_outcomes"]


def known_outcomes(
    known_failure: Callable[[Any], bool] | None, actions: Sequence[Any], n: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per env: whether its outcome is known to be a failure, and its status where the
    predicate tells one (a :class:`~wmrl_env.sandboxes.pregate.PreGate` answers a whole
    batch with statuses; a plain predicate gives ``"failed"``)."""
    if known_failure is None:
        return np.zeros(n, dtype=bool), np.full(n, "", dtype=object)
    if isinstance(known_failure, PreGate):
        answer = known_failure.answer(actions)
        return answer.known, answer.status.astype(object)
    known = np.array([bool(known_failure(a)) for a in actions], dtype=bool)
    return known, np.where(known, "failed", "").astype(object)


class OutcomeRound(Round):
    """A one-step round; ``update_world_model`` feeds the anchors' real scores back."""

    def __init__(self, setup: RoundSetup, update_world_model: bool = True) -> None:
        super().__init__(setup)
        self.update_world_model = update_world_model

    def step(self, actions: list[Any]) -> StepOutput:
        setup = self.setup
        layout, starts = setup.layout, setup.starts
        contexts = layout.expand(starts.observations)

        submitted_at = time.perf_counter()
        known, known_status = known_outcomes(setup.known_failure, actions, layout.num_envs)
        early = None
        selection = setup.selection
        if self.anchors is None or selection.execute_per_group is not None:
            # prediction-driven anchors or screening: they need this step's prediction
            early = predict_outcome(setup.world_model, contexts, actions, setup.score_range)
        if self.anchors is None:
            self.anchors = self._draw_anchors(early[0], known)
        if selection.execute_per_group is not None:
            self.anchors = self._screen(early[0], known)
        indices = list(np.flatnonzero(self.anchors & ~known))
        futures = self._submit(indices, actions)  # they run while the world model predicts
        prediction, wm_seconds = early or predict_outcome(
            setup.world_model, contexts, actions, setup.score_range
        )
        unknown_invalid = ~prediction.valid & ~known
        forced = layout.groups_of(unknown_invalid) & ~layout.groups_of(self.anchors)
        if forced.any():
            extra = list(np.flatnonzero(layout.members(forced) & ~known))
            futures += self._submit(extra, actions)
            indices += extra
        if unknown_invalid.any():  # pi = 1 for every group with an invalid prediction
            self.force_groups(layout.groups_of(unknown_invalid))
        results = [future.result() for future in futures]
        real_wall_seconds = time.perf_counter() - submitted_at
        self.real.add_all(indices, results)
        self.start_mismatches = check_same_starts(
            starts, [int(layout.group_ids[i]) for i in indices], results
        )

        info: dict[str, Any] = {}
        known_scores = np.where(known, setup.failure_score, np.nan)
        rewards = self.fuse(prediction.scores, prediction.valid, info, prediction.std, known_scores)
        add_per_env(info, known_failure=known, known_status=known_status)
        self.real_info(info)
        add_per_env(
            info,
            group_id=layout.group_ids.copy(),
            wm_invalid_reason=np.array(prediction.reasons, dtype=object),
        )
        if prediction.std is not None:
            add_per_env(info, wm_std=prediction.std)
        add_batch(
            info,
            layout.num_envs,
            wm_seconds=wm_seconds,
            real_wall_seconds=real_wall_seconds,
            real_exec_seconds=float(sum(r.exec_seconds for r in results)),
            round_done=True,
        )
        if self.update_world_model:
            learn_from_real_scores(setup.world_model, contexts, actions, self.real.score)
        n = layout.num_envs
        return StepOutput(
            observations=contexts,
            rewards=rewards,
            terminated=np.ones(n, dtype=bool),
            truncated=np.zeros(n, dtype=bool),
            info=info,
        )

    def _draw_anchors(self, prediction: Prediction, known: np.ndarray) -> np.ndarray:
        """Anchors drawn with priorities from the world model's predictive std
        (``"uncertainty"``) or from each group's upper bound above the best real score
        found so far in its context (``"ucb"``); members with a known outcome add nothing."""
        selection = self.setup.selection
        group_ids = self.setup.layout.group_ids
        if selection.priority == "ucb":
            priorities = ucb_priorities(
                group_ids,
                np.where(prediction.valid, prediction.scores, np.nan),
                prediction.std,
                selection.ucb_kappa,
                selection.reference,
                known=known,
            )
        elif prediction.std is None:
            raise ValueError(
                "anchor_priority='uncertainty' needs a world model that returns a std "
                "(predict -> (scores, std) or a Prediction with std)"
            )
        else:
            priorities = uncertainty_priorities(group_ids, prediction.std, known=known)
        return np.asarray(self.setup.fusion.select_anchors(group_ids, priorities), dtype=bool)

    def _screen(self, prediction: Prediction, known: np.ndarray) -> np.ndarray:
        """The members of the anchor groups to execute: ``execute_per_group`` of each, by
        their upper bound ``s + ucb_kappa * std`` (a group with an invalid prediction is
        executed whole; members with a known outcome are never chosen); the fusion records
        each member's probability."""
        selection = self.setup.selection
        std = np.zeros(len(prediction)) if prediction.std is None else prediction.std
        upper = np.where(prediction.valid, prediction.scores + selection.ucb_kappa * std, np.nan)
        executed, member_pi = screen_members(
            self.setup.layout.group_ids,
            upper,
            selection.execute_per_group,
            selection.rng,
            selection.screening,
            self.setup.fusion.uniform_mix,
            known=known,
        )
        return np.asarray(
            self.setup.fusion.screen_anchors(executed, member_pi, known=known), dtype=bool
        )

    def _submit(self, indices: list[int], actions: list[Any]) -> list[Future[ExecResult]]:
        group_ids = self.setup.layout.group_ids
        jobs = [
            self.setup.starts.job(int(group_ids[i]), actions=(actions[i],), env=int(i))
            for i in indices
        ]
        return self.setup.executor.submit(jobs)
