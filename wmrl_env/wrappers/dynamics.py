"""One round of a multi-step task with a dynamics world model (``predict_step``).

World-model groups live in the model: their observations, rewards and terminations are
imagined. Anchor groups step the real env (one job per step, in a persistent slot, so real
episodes run concurrently across members), and their world-model score comes from the model
*shadowing* them (:mod:`~wmrl_env.wrappers.shadows`). The ``"open"`` shadow: each step the
same batched ``predict_step`` call that moves the world-model groups also moves a model copy of
every anchor member from the same start with the same actions. The ``"closed"`` and
``"continued"`` shadows are imagined when the round's episodes have ended, from the anchors'
recorded real states and actions (:class:`~wmrl_env.wrappers.shadows.AnchorShadow`).

Returned rewards: every step returns 0, except the step where the round's last episode ends,
which returns every member's fused trajectory reward (``info["step_reward"]`` has the raw
per-step reward of each step). Episodes that end early stay ended (their ``terminated`` /
``truncated`` flags stay set and their actions are ignored) until the round ends; the vector
env never autoresets (``AutoresetMode.DISABLED``): a GRPO batch is the whole round.

The world-model score's std, passed to the fusion's gate, is the root of the summed per-step
variances along each imagined episode (the open shadow's and the closed or continued
shadow's too); a round where any step came without a usable std passes none.

A world-model member whose prediction goes invalid (NaN, inf) is truncated there; at the end
of the round its whole group is replayed open-loop in the real env (the recorded actions from
the group's start) and becomes an anchor with inclusion probability 1. A drawn group whose
closed shadow goes invalid is given inclusion probability 1 too (the closed shadow is the
episode the group would have imagined undrawn, so it would have run for real either way), and
``ppi`` gives its members their real return, not ``r / pi``.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import numpy as np

from wmrl_env.env_executors.gym_env import EnvJob
from wmrl_env.executors.base import ExecResult
from wmrl_env.world_models.base import Prediction
from wmrl_env.wrappers.branches import BranchPlan, RealState
from wmrl_env.wrappers.info import add_batch, add_per_env
from wmrl_env.wrappers.rounds import Round, RoundSetup, StepOutput
from wmrl_env.wrappers.shadows import AnchorShadow, step_variance
from wmrl_env.wrappers.starts import check_same_starts
from wmrl_env.wrappers.world_model_calls import predict_step

__all__ = ["DynamicsRound"]


class DynamicsRound(Round):
    """A multi-step round; see the module docstring for what each step returns.

    ``shadow``: how anchors get their world-model score, ``None`` for the open shadow.
    ``branch``: groups started from recorded real states
    (:class:`~wmrl_env.wrappers.branches.BranchPlan`: each group's start age and horizon);
    with it, the real states the anchors reach are kept in :attr:`visited` for later rounds.
    """

    def __init__(
        self,
        setup: RoundSetup,
        max_episode_steps: int,
        observation_dtype: Any,
        shadow: AnchorShadow | None = None,
        branch: BranchPlan | None = None,
    ) -> None:
        super().__init__(setup)
        self.shadow = shadow
        n = setup.layout.num_envs
        start = _stack(setup.layout.expand(setup.starts.observations), observation_dtype)
        self.max_episode_steps = max_episode_steps
        groups = setup.layout.group_ids
        self.branch = branch
        # per env: the steps it may play and, with branched starts, how far into its episode
        # its group starts
        self.horizon = np.full(n, max_episode_steps, np.int64)
        self.start_age: np.ndarray | None = None
        if branch is not None:
            self.horizon, self.start_age = branch.horizons[groups], branch.ages[groups]
        self.visited: list[RealState] = []  # with a branch plan: real states anchors reached
        self.observations = start.astype(observation_dtype, copy=True)
        self.model_observations = start.astype(observation_dtype, copy=True)
        self.model_active = np.ones(n, dtype=bool)  # the model still moves this member
        self.wm_return = np.zeros(n)
        self.wm_valid = np.ones(n, dtype=bool)
        # the imagined returns' variance, summed over steps; None once a step has no usable std
        self.wm_variance: np.ndarray | None = np.zeros(n)
        self.terminated = np.zeros(n, dtype=bool)
        self.truncated = np.zeros(n, dtype=bool)
        self.steps = np.zeros(n, dtype=np.int64)
        self.actions: list[list[Any]] = [[] for _ in range(n)]
        self.real_states: list[list[np.ndarray]] = [[] for _ in range(n)]  # shadows imagine
        # after an episode ends: the observation it shows and the learner's (ignored) action,
        # whose noise carries a shadow on past the real episode (AnchorShadow.scores)
        self.spare: list[list[tuple[np.ndarray, Any]]] = [[] for _ in range(n)]
        # executor slots numbered per round: the real envs kept alive are bounded by the
        # anchors of one round, not by every env that was ever an anchor
        self.slot_of = {int(i): k for k, i in enumerate(np.flatnonzero(setup.anchors))}
        # the anchors play from the first step; groups with an invalid prediction are forced
        # when the round ends (replayed from their start)
        self.plan = setup.engine.plan(setup.layout.group_ids, None, drawn=setup.anchors)

    def step(self, actions: list[Any]) -> StepOutput:
        setup = self.setup
        n = setup.layout.num_envs
        active = ~(self.terminated | self.truncated)
        batch = _stack(actions, None)
        for i in np.flatnonzero(active):
            self.actions[i].append(actions[i])
        if self.shadow is not None:
            for i in np.flatnonzero(active & setup.anchors):
                self.real_states[i].append(self.observations[i].copy())
            if self.shadow.keep_noise:
                for i in np.flatnonzero(~active):
                    self.spare[i].append((self.observations[i].copy(), actions[i]))

        submitted_at = time.perf_counter()
        real = np.flatnonzero(setup.anchors & active)
        futures = setup.executor.submit([self._real_job(i, actions[i]) for i in real])
        step_reward = np.zeros(n)
        wm_seconds = self._model_step(active, batch, step_reward)
        results = [future.result() for future in futures]
        real_wall_seconds = time.perf_counter() - submitted_at
        self._real_step(real, results, step_reward)

        self.steps[active] += 1
        self.truncated |= active & ~self.terminated & (self.steps >= self.horizon)
        self._keep_visited(real, results)
        info: dict[str, Any] = {}
        add_per_env(
            info,
            active=active,
            step_reward=step_reward,
            group_id=setup.layout.group_ids.copy(),
            is_anchor=setup.anchors.copy(),
        )
        if self.start_age is not None:
            add_per_env(info, start_age=self.start_age.copy())
        rewards, replays = np.zeros(n), []
        round_done = bool((self.terminated | self.truncated).all())
        if round_done:
            wm_seconds += self._imagine_shadows()
            rewards, replays = self._finish(info)
        add_batch(
            info,
            n,
            wm_seconds=wm_seconds,
            real_wall_seconds=real_wall_seconds,
            real_exec_seconds=float(sum(r.exec_seconds for r in results + replays)),
            round_done=round_done,
        )
        self.real_info(info)
        add_per_env(info, episode_length=self.steps.copy())
        return StepOutput(
            observations=list(self.observations),
            rewards=rewards,
            terminated=self.terminated.copy(),
            truncated=self.truncated.copy(),
            info=info,
        )

    def _real_job(self, index: int, action: Any) -> EnvJob:
        slot = self.slot_of[int(index)]
        record = self.branch is not None
        if self.steps[index] == 0:
            group = int(self.setup.layout.group_ids[index])
            job = self.setup.starts.job(group, actions=(action,), slot=slot, env=int(index))
            return replace(job, snapshot_after=record)
        return EnvJob(
            actions=(action,), slot=slot, reset=False, snapshot_after=record,
            tags={"env": int(index)},
        )  # fmt: skip

    def _keep_visited(self, indices: np.ndarray, results: list[ExecResult]) -> None:
        """With branched starts planned, keep the real states the anchors' episodes go on from."""
        if self.branch is None:
            return
        for i, result in zip(indices, results, strict=True):
            snapshot = result.metadata.get("end_snapshot") if result.ok else None
            if snapshot is not None:  # taken only while the env's own episode goes on
                age = int(self.start_age[i] + self.steps[i])
                self.visited.append(RealState(self.observations[i].copy(), snapshot, age))

    def _model_step(
        self, active: np.ndarray, actions: np.ndarray, step_reward: np.ndarray
    ) -> float:
        """Move world-model members and open anchor shadows one step in one batched call."""
        moved = active & self.model_active
        rows = np.flatnonzero(moved if self.shadow is None else moved & ~self.setup.anchors)
        if rows.size == 0:
            return 0.0
        prediction, seconds = predict_step(
            self.setup.world_model, self.model_observations[rows], actions[rows]
        )
        good, bad = rows[prediction.valid], rows[~prediction.valid]
        self.model_observations[good] = prediction.next_observations[prediction.valid]
        self.wm_return[good] += prediction.rewards[prediction.valid]
        self._add_variance(good, step_variance(prediction, prediction.valid))
        self.wm_valid[bad] = False
        self.model_active[bad] = False
        self.model_active[rows[prediction.valid & prediction.terminations]] = False
        own = ~self.setup.anchors
        imagined = good[own[good]]
        self.observations[imagined] = self.model_observations[imagined]
        step_reward[imagined] = prediction.rewards[prediction.valid][own[good]]
        self.terminated[imagined] |= ~self.model_active[imagined]
        self.truncated[bad[own[bad]]] = True
        return seconds

    def _real_step(
        self, indices: np.ndarray, results: list[ExecResult], step_reward: np.ndarray
    ) -> None:
        self.real.add_all(list(indices), results)
        first = [(i, r) for i, r in zip(indices, results, strict=True) if self.steps[i] == 0]
        if first:
            groups = [int(self.setup.layout.group_ids[i]) for i, _ in first]
            self.start_mismatches += check_same_starts(
                self.setup.starts, groups, [r for _, r in first]
            )
        for i, result in zip(indices, results, strict=True):
            if not result.ok:
                self.truncated[i] = True
                continue
            meta = result.metadata
            self.observations[i] = meta["observation"]
            step_reward[i] = sum(meta["rewards"])
            self.terminated[i] = meta["terminated"]
            self.truncated[i] = meta["truncated"]

    def _imagine_shadows(self) -> float:
        """Score the anchors by their closed or continued shadows; returns the seconds."""
        anchors = np.flatnonzero(self.setup.anchors)
        played = [i for i in anchors if self.real_states[i]]
        if self.shadow is None or not played:
            return 0.0
        states = [np.stack(self.real_states[i]) for i in played]
        actions = [np.stack([np.asarray(a) for a in self.actions[i]]) for i in played]
        pool = self._spare(range(len(self.spare)))
        began = time.perf_counter()
        scores, valid, std = self.shadow.scores(
            self.setup.world_model,
            states,
            actions,
            self.horizon[played],
            spare=[self._spare([i]) for i in played],
            pool=pool,
            rng=self.setup.selection.rng,
        )
        self.wm_return[played], self.wm_valid[played] = scores, valid
        if self.wm_variance is not None:
            self.wm_variance[played] = 0.0
        self._add_variance(np.asarray(played), None if std is None else std**2)
        return time.perf_counter() - began

    def _add_variance(self, rows: np.ndarray, variance: np.ndarray | None) -> None:
        """Add ``variance`` to the imagined returns of ``rows``; ``None`` (no usable std)
        drops the round's std."""
        if variance is None:
            self.wm_variance = None
        elif self.wm_variance is not None:
            self.wm_variance[rows] += variance

    def _spare(self, envs: Any) -> tuple[np.ndarray, np.ndarray]:
        """The observations and actions recorded after the episodes of ``envs`` ended."""
        rows = [row for i in envs for row in self.spare[i]]
        action_shape = np.asarray(self.actions[0][0]).shape if self.actions[0] else ()
        if not rows:
            empty = np.zeros((0, *self.observations.shape[1:]), self.observations.dtype)
            return empty, np.zeros((0, *action_shape))
        observations = np.stack([o for o, _ in rows])
        return observations, np.stack([np.asarray(a, dtype=np.float64) for _, a in rows])

    def _finish(self, info: dict[str, Any]) -> tuple[np.ndarray, list[ExecResult]]:
        """Replay groups with invalid predictions for real, then fuse the round."""
        # the round's real episodes are over: their envs stay alive for what comes next
        self.setup.executor.end_episodes()
        layout = self.setup.layout
        invalid = layout.groups_of(~self.wm_valid)
        replay = invalid & ~layout.groups_of(self.setup.anchors)
        results: list[ExecResult] = []
        # a closed shadow is the episode the group would have imagined undrawn: one that went
        # invalid means the group runs for real either way, so pi = 1 drawn or not. The open
        # and continued shadows read the real states: a drawn group's stays its draw's pi
        closed = self.shadow is not None and self.shadow.mode == "closed"
        forced = layout.members(invalid if closed else replay)
        self.plan = self.setup.engine.force(self.plan, forced)
        if replay.any():
            indices = list(np.flatnonzero(layout.members(replay)))
            jobs = [
                self.setup.starts.job(int(layout.group_ids[i]), self.actions[i], env=int(i))
                for i in indices
            ]
            results = self.setup.executor.run(jobs)
            self.real.add_all(indices, results)
        std = None if self.wm_variance is None else np.sqrt(self.wm_variance)
        prediction = Prediction(self.wm_return, std=std, valid=self.wm_valid)
        return self.fuse(prediction, info), results


def _stack(items: list[Any], dtype: Any) -> np.ndarray:
    """Numeric items stacked into one array; anything else (texts, program objects) as an
    object array with one item per row."""
    first = np.asarray(items[0]) if items else np.zeros(0)
    if dtype is object or first.dtype.kind not in "biufc":
        array = np.empty(len(items), dtype=object)
        for i, item in enumerate(items):
            array[i] = item
        return array
    return np.stack([np.asarray(item) for item in items])
