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

The draw, screening, forcing and known outcomes are planned by the anchored round's engine
(:meth:`~wmrl_env.rounds.AnchoredRound.plan`), and the round is finished by it
(:meth:`~wmrl_env.rounds.AnchoredRound.finish`), as in every integration.

The world model may learn from the round's real scores (``update``), when it has that method
(:func:`~wmrl_env.world_models.base.learn_from_real_scores`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

import numpy as np

from wmrl_env.executors.base import ExecResult
from wmrl_env.rounds.plan import known_outcomes
from wmrl_env.world_models.base import learn_from_real_scores
from wmrl_env.wrappers.info import add_batch, add_per_env
from wmrl_env.wrappers.rounds import Round, RoundSetup, StepOutput
from wmrl_env.wrappers.starts import check_same_starts
from wmrl_env.wrappers.world_model_calls import predict_outcome

__all__ = ["OutcomeRound", "known_outcomes"]


class OutcomeRound(Round):
    """A one-step round; ``update_world_model`` feeds the anchors' real scores back."""

    def __init__(self, setup: RoundSetup, update_world_model: bool = True) -> None:
        super().__init__(setup)
        self.update_world_model = update_world_model

    def step(self, actions: list[Any]) -> StepOutput:
        setup, engine = self.setup, self.setup.engine
        layout, starts = setup.layout, setup.starts
        contexts = layout.expand(starts.observations)

        submitted_at = time.perf_counter()
        known, known_status = known_outcomes(setup.known_failure, actions)
        early = None
        if self.anchors is None or engine.selection.needs_prediction:
            # prediction-driven anchors or screening: they need this step's prediction
            early = predict_outcome(setup.world_model, contexts, actions, setup.score_range)
        if self.anchors is None:
            self.anchors = engine.draw(layout.group_ids, early[0], known)
        indices: list[int] = []
        futures: list[Future[ExecResult]] = []
        if early is None:  # anchors drawn at reset: they run while the world model predicts
            indices = list(np.flatnonzero(self.anchors & ~known))
            futures = self._submit(indices, actions)
        prediction, wm_seconds = early or predict_outcome(
            setup.world_model, contexts, actions, setup.score_range
        )
        plan = engine.plan(layout.group_ids, prediction, known, known_status, drawn=self.anchors)
        self.plan = plan
        submitted = np.zeros(layout.num_envs, dtype=bool)
        submitted[indices] = True
        for batch in (plan.execute & plan.drawn, plan.execute):  # drawn groups, then forced
            extra = list(np.flatnonzero(batch & ~submitted))
            submitted[extra] = True
            futures += self._submit(extra, actions)
            indices += extra
        results = [future.result() for future in futures]
        real_wall_seconds = time.perf_counter() - submitted_at
        self.real.add_all(indices, results)
        self.start_mismatches = check_same_starts(
            starts, [int(layout.group_ids[i]) for i in indices], results
        )

        info: dict[str, Any] = {}
        rewards = self.fuse(prediction, info)
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

    def _submit(self, indices: Sequence[int], actions: list[Any]) -> list[Future[ExecResult]]:
        if not indices:
            return []
        group_ids = self.setup.layout.group_ids
        jobs = [
            self.setup.starts.job(int(group_ids[i]), actions=(actions[i],), env=int(i))
            for i in indices
        ]
        return self.setup.executor.submit(jobs)
