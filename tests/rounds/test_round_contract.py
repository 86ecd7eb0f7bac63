"""Every adapter of the anchored round runs the same conformance suite
(:mod:`wmrl_env.testing.round_contract`): PPI exact over the draw for every kind of sample, the
circuit breaker, clusters and std at the gate."""

from __future__ import annotations

import asyncio
import math

import gymnasium as gym
import numpy as np
import pytest

from wmrl_env.integrations.verl.estimator import FusedAdvantageEstimator
from wmrl_env.integrations.verl.ledger import Ledger
from wmrl_env.integrations.verl.scoring import SampleDraw, score_sample
from wmrl_env.rounds import ROUND_METRICS, InfrastructureHealth, task_cluster
from wmrl_env.testing.round_contract import AnchoredRoundContract
from wmrl_env.testing.round_scenario import (
    PlayedRound,
    RoundScenario,
    ScenarioExecutor,
    ScenarioWorldModel,
)
from wmrl_env.wrappers import WorldModelVectorEnv, WorldModelWrapper, batch_diagnostics


class ScenarioBandit(gym.Env):
    """The scenario as a real env: reset draws a task, the one step plays an action; the
    known failure returns a non-finite reward (a program failure); ``broken``: the env
    raises (an infrastructure failure)."""

    observation_space = gym.spaces.Discrete(4)
    action_space = gym.spaces.Discrete(4)

    def __init__(self, scenario: RoundScenario, executor: ScenarioExecutor) -> None:
        self.scenario, self.executor, self.task = scenario, executor, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.task = int(self.np_random.integers(self.scenario.num_tasks))
        return self.task, {}

    def step(self, action):
        self.executor.executed.append((self.task, int(action)))
        if self.executor.broken:
            raise RuntimeError("the simulator's worker died")
        if self.scenario.is_known_failure(action):
            return self.task, math.nan, True, False, {}
        return self.task, self.scenario.real(self.task, int(action)), True, False, {}


class TestVectorEnvRound(AnchoredRoundContract):
    draws = 1200

    def _env(self, fusion, executor, limit=32, world_model=None, execute_per_group=None):
        s = self.scenario
        return WorldModelVectorEnv(
            lambda: ScenarioBandit(s, executor),
            world_model or ScenarioWorldModel(s),
            num_groups=s.num_tasks,
            group_size=s.group_size,
            fusion=fusion,
            executor="inline",
            failure_score=s.failure_score,
            known_failure=s.is_known_failure,
            update_world_model=False,
            max_infrastructure_failures=limit,
            execute_per_group=execute_per_group,
        )

    def _round(self, envs, seed):
        s = self.scenario
        obs, _ = envs.reset(seed=seed)
        tasks = [int(t) for t in obs[:: s.group_size]]
        actions = [a for t in tasks for a in s.actions(t)]
        _, _, _, _, info = envs.step(np.array(actions))
        per_env = [(t, a) for t, a in zip(np.repeat(tasks, s.group_size), actions, strict=True)]
        return info, per_env

    def play(self, fusion, seed, executor, *, world_model=None, execute_per_group=None):
        s = self.scenario
        envs = self._env(fusion, executor, 32, world_model, execute_per_group)
        try:
            info, per_env = self._round(envs, seed)
        finally:
            envs.close()
        truth = np.array([s.real(t, a) for t, a in per_env])
        return PlayedRound(
            info["fused_reward"],
            truth,
            [s.kind(t, a) for t, a in per_env],
            samples=per_env,
            advantages=info["advantage"],
            executed=np.isfinite(info["real_score"]),
            known=info["known_failure"],
            metrics=batch_diagnostics(info),
        )

    def play_broken(self, limit, executor):
        envs = self._env(self.make_fusion(0), executor, limit)
        try:
            for seed in range(8):
                self._round(envs, seed)
        finally:
            envs.close()

    def test_clusters_and_std_reach_the_gate(self) -> None:
        # the env draws each group's task: the same fusion over rounds sees recurring tasks
        fusion = self.make_fusion(0, method="wmrl")
        executor = ScenarioExecutor(self.scenario)
        envs = self._env(fusion, executor)
        tasks = set()
        try:
            for seed in range(2):
                _, per_env = self._round(envs, seed)
                tasks |= {t for t, _ in per_env}
        finally:
            envs.close()
        labels = {c for call in fusion.calls for c in call["clusters"]}
        assert len(labels) == len(tasks)
        assert all(call["wm_std"] is not None for call in fusion.calls)


class TestVerlRound(AnchoredRoundContract):
    """verl's per-sample round (the reward worker's :func:`score_sample`, without verl's
    DataProto) and its advantage estimator. verl scores each sample alone: no screening."""

    screens = False

    def _records(self, executor, health, batch, world_model=None, fraction=None):
        s = self.scenario
        model = world_model or ScenarioWorldModel(s)
        fraction = s.anchor_fraction if fraction is None else fraction
        samples = []
        for t in range(s.num_tasks):
            uid = f"batch{batch}-group{t}"
            for i, a in enumerate(s.actions(t)):
                known = s.is_known_failure(a)
                draw = SampleDraw(uid, f"{uid}_{i}", 0, fraction, known, task_cluster(t))
                samples.append((t, a, draw))

        async def one(t, a, draw):
            async def predict():
                scores, std = model.predict([t], [a])
                return float(scores[0]), bool(np.isfinite(scores[0])), float(std[0])

            def submit():
                return asyncio.wrap_future(executor.submit([(t, a)])[0])

            return await score_sample(draw, predict, submit, health, s.failure_score)

        async def every():
            return await asyncio.gather(*(one(*sample) for sample in samples))

        records = asyncio.run(every())
        return samples, records

    def _fuse(self, fusion, records):
        torch = pytest.importorskip("torch")
        ledger = Ledger()
        ledger.put(records)
        logged = {}
        estimator = FusedAdvantageEstimator(fusion, ledger, log_metrics=logged.update)
        rewards = torch.tensor([r.reward for r in records], dtype=torch.float64)[:, None]
        advantages, _ = estimator(rewards, torch.ones_like(rewards), index=[r.uid for r in records])
        call = estimator.last_call
        fused = np.full(len(records), np.nan)
        fused[call.included] = call.fusion.rewards
        metrics = {k.removeprefix("wmrl/"): v for k, v in logged.items()}
        return fused, advantages[:, 0].numpy(), metrics

    def play(self, fusion, seed, executor, *, world_model=None, execute_per_group=None):
        assert execute_per_group is None
        s = self.scenario
        samples, records = self._records(
            executor, InfrastructureHealth(32), seed, world_model, fusion.anchor_fraction
        )
        truth = np.array([s.real(t, a) for t, a, _ in samples])
        kinds = [s.kind(t, a) for t, a, _ in samples]
        fused, advantages, metrics = self._fuse(fusion, records)
        return PlayedRound(
            fused,
            truth,
            kinds,
            samples=[(t, a) for t, a, _ in samples],
            advantages=advantages,
            executed=np.array([np.isfinite(r.real_score) for r in records]),
            known=np.array([np.isfinite(r.known_score) for r in records]),
            metrics=metrics,
        )

    def play_broken(self, limit, executor):
        health = InfrastructureHealth(limit)
        for batch in range(8):
            self._records(executor, health, batch)


@pytest.mark.trl
class TestTRLRound(AnchoredRoundContract):
    """TRL's reward function (:class:`~wmrl_env.integrations.trl.WorldModelReward`)."""

    draws = 1200

    def _reward(self, fusion, executor, limit=32, world_model=None, execute_per_group=None, seed=0):
        trl = pytest.importorskip("wmrl_env.integrations.trl")
        s = self.scenario
        return trl.WorldModelReward(
            world_model or ScenarioWorldModel(s),
            executor,
            to_job=lambda prompt, completion: (int(prompt[-1]), int(completion[-1])),
            fusion=fusion,
            num_generations=s.group_size,
            failure_score=s.failure_score,
            update_world_model=False,
            known_failure=lambda text: s.is_known_failure(int(text[-1])),
            max_infrastructure_failures=limit,
            execute_per_group=execute_per_group,
            screening_seed=seed,
        )

    def _batch(self):
        s = self.scenario
        pairs = [(t, a) for t in range(s.num_tasks) for a in s.actions(t)]
        return pairs, [f"task {t}" for t, _ in pairs], [f"action {a}" for _, a in pairs]

    def play(self, fusion, seed, executor, *, world_model=None, execute_per_group=None):
        s = self.scenario
        reward = self._reward(fusion, executor, 32, world_model, execute_per_group, seed)
        pairs, prompts, completions = self._batch()
        logged = {}
        reward(prompts, completions, log_metric=logged.__setitem__)
        truth = np.array([s.real(t, a) for t, a in pairs])
        kinds = [s.kind(t, a) for t, a in pairs]
        call = reward.last_call
        return PlayedRound(
            call.fusion.rewards,
            truth,
            kinds,
            samples=pairs,
            advantages=call.fusion.advantages,
            executed=np.isfinite(call.real_scores),
            known=call.known_failure,
            metrics={k.removeprefix("wmrl/"): v for k, v in logged.items()},
        )

    def play_broken(self, limit, executor):
        reward = self._reward(self.make_fusion(0), executor, limit)
        _, prompts, completions = self._batch()
        for _ in range(8):
            reward(prompts, completions)


class ScenarioTask(ScenarioBandit):
    """The scenario as one env whose reset plays the task in ``options["task"]``."""

    def reset(self, *, seed=None, options=None):
        gym.Env.reset(self, seed=seed)
        self.task = int((options or {}).get("task", 0))
        return self.task, {}


class TestSingleEnvRound(AnchoredRoundContract):
    """The single-env wrapper (:class:`~wmrl_env.wrappers.WorldModelWrapper`): a round is the
    scenario's samples played as episodes, each an anchor with probability
    ``anchor_fraction``; groups of one, so no screening and no group advantages."""

    screens = False
    groups = False

    def make_fusion(self, seed, method="ppi", **options):
        return super().make_fusion(seed, method, centre_groups=False, **options)

    def _wrapper(self, fusion, executor, limit=32, world_model=None):
        s = self.scenario
        return WorldModelWrapper(
            ScenarioTask(s, executor),
            world_model or ScenarioWorldModel(s),
            anchor_probability=fusion.anchor_fraction,
            fusion=fusion,
            task="outcome",
            failure_score=s.failure_score,
            known_failure=s.is_known_failure,
            max_infrastructure_failures=limit,
        )

    def _round(self, env, seed):
        s = self.scenario
        env.reset(seed=seed)
        pairs = [(t, a) for t in range(s.num_tasks) for a in s.actions(t)]
        infos = []
        for t, a in pairs:
            env.reset(options={"task": t})
            infos.append(env.step(a)[-1])
        return pairs, infos

    def play(self, fusion, seed, executor, *, world_model=None, execute_per_group=None):
        assert execute_per_group is None
        s = self.scenario
        pairs, infos = self._round(self._wrapper(fusion, executor, 32, world_model), seed)
        metrics = {
            name: sum(info[name] for info in infos) for name in ROUND_METRICS if name[:2] == "n_"
        }
        metrics["wm_valid_fraction"] = float(np.mean([info["wm_valid"] for info in infos]))
        metrics["kappa"] = infos[-1]["kappa"]
        return PlayedRound(
            np.array([info["fused_reward"] for info in infos]),
            np.array([s.real(t, a) for t, a in pairs]),
            [s.kind(t, a) for t, a in pairs],
            samples=pairs,
            executed=np.array([info["n_executed"] == 1 for info in infos]),
            known=np.array([info["known_failure"] for info in infos]),
            metrics=metrics,
        )

    def play_broken(self, limit, executor):
        env = self._wrapper(self.make_fusion(0), executor, limit)
        for seed in range(8):
            self._round(env, seed)

    def test_clusters_and_std_reach_the_gate(self) -> None:
        """Each update of the wrapper is one cluster of the gate (no task labels); the
        world model's std reaches it with the anchor pairs."""
        fusion = self.make_fusion(0, method="wmrl", anchor_fraction=1.0)
        self.play(fusion, 0, ScenarioExecutor(self.scenario))
        assert fusion.observed, "no anchor pairs reached the fusion"
        for call in fusion.observed:
            std = call.get("wm_std")
            assert std is not None and std.shape == call["wm_scores"].shape and (std > 0).all()
            assert call.get("clusters") is None


class TestPerTaskBenchRound(AnchoredRoundContract):
    """The per-task bench's round (:func:`~wmrl_env.bench.pertask.play_round`): the bench's
    own draw over tasks (``balanced``, exact inclusion probabilities) and its engine
    (:func:`~wmrl_env.bench.pertask.round_engine`), every task once. The scenario's known
    failures are passed as known outcomes (the bench's execution table has none)."""

    draws = 1200

    def _engine(self, fusion, rng, keep, limit=32):
        from wmrl_env.bench import pertask
        from wmrl_env.bench.pertask_config import PerTaskConfig

        s = self.scenario
        config = PerTaskConfig(
            group_size=s.group_size, execute_per_group=keep or 0, arms=(fusion.method,)
        )
        engine = pertask.round_engine(fusion, config, rng, keep or 0, s.failure_score, limit)
        return config, engine

    def _round(self, engine, config, fusion, rng, executor, world_model=None):
        from wmrl_env.bench import pertask
        from wmrl_env.fusion.anchors import num_anchor_groups
        from wmrl_env.world_models.base import as_prediction

        s = self.scenario
        pairs = [(t, a) for t in range(s.num_tasks) for a in s.actions(t)]
        group_ids = np.array([t for t, _ in pairs])
        model = world_model or ScenarioWorldModel(s)
        prediction = as_prediction(model.predict(group_ids, [a for _, a in pairs]), n=len(pairs))
        keep = engine.selection.execute_per_group or 0
        m = num_anchor_groups(s.num_tasks, fusion.anchor_fraction, minimum=1)
        m = pertask.fused_anchor_tasks(m, s.num_tasks, s.group_size, keep)
        executions = np.zeros(s.num_tasks, dtype=np.int64)
        chosen, pi = pertask.draw_anchor_tasks(
            executions, m, config.anchor_draw, rng, config.balance_mix
        )
        known = np.array([s.is_known_failure(a) for _, a in pairs])

        def run(todo):
            return executor.run([pairs[i] for i in todo])

        finished = pertask.play_round(engine, group_ids, prediction, chosen, pi, run, known)
        return pairs, finished

    def play(self, fusion, seed, executor, *, world_model=None, execute_per_group=None):
        s = self.scenario
        rng = np.random.default_rng([seed, 7])
        config, engine = self._engine(fusion, rng, execute_per_group)
        pairs, finished = self._round(engine, config, fusion, rng, executor, world_model)
        out = finished.fusion
        return PlayedRound(
            out.rewards,
            np.array([s.real(t, a) for t, a in pairs]),
            [s.kind(t, a) for t, a in pairs],
            samples=pairs,
            advantages=out.advantages,
            executed=np.isfinite(finished.record.score),
            known=finished.plan.known,
            metrics=finished.metrics,
        )

    def play_broken(self, limit, executor):
        fusion = self.make_fusion(0)
        rng = np.random.default_rng(0)
        config, engine = self._engine(fusion, rng, None, limit)
        for _ in range(8):
            self._round(engine, config, fusion, rng, executor)
