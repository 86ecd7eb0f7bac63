"""The conformance suite (:mod:`wmrl_env.testing.round_contract`) on the vector env's
multi-step round, the robot bench's path: a dynamics world model imagines each episode step
by step, anchors play theirs in the real env, a group holding an invalid imagined step is
replayed for real."""

from __future__ import annotations

import functools

import gymnasium as gym
import numpy as np
import pytest

from wmrl_env.fusion import RewardFusion
from wmrl_env.testing.round_contract import AnchoredRoundContract
from wmrl_env.testing.round_scenario import (
    KINDS,
    PlayedRound,
    RecordingFusion,
    RoundScenario,
    ScenarioExecutor,
    ScenarioWorldModel,
    check_unbiased,
)
from wmrl_env.world_models.base import StepPrediction
from wmrl_env.wrappers import WorldModelVectorEnv, batch_diagnostics

STEPS = 2  # each episode: two steps, each paying half the scenario's real outcome


class ScenarioWalk(gym.Env):
    """The scenario as a multi-step env: the observation is ``(task, step)``, the action (a
    number) the scenario's action, each of the ``STEPS`` steps pays ``real / STEPS``;
    ``reset`` draws a task and names it in ``info["task_id"]``; ``broken``: the env raises
    (an infrastructure failure)."""

    observation_space = gym.spaces.Box(0.0, 8.0, shape=(2,), dtype=np.float64)
    action_space = gym.spaces.Box(0.0, 3.0, shape=(1,), dtype=np.float64)

    def __init__(self, scenario: RoundScenario, executor: ScenarioExecutor) -> None:
        self.scenario, self.executor, self.task, self.t = scenario, executor, 0, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.task, self.t = int(self.np_random.integers(self.scenario.num_tasks)), 0
        return np.array([self.task, 0.0]), {"task_id": self.task}

    def step(self, action):
        action = round(float(np.asarray(action).reshape(-1)[0]))
        self.executor.executed.append((self.task, action))
        if self.executor.broken:
            raise RuntimeError("the simulator's worker died")
        self.t += 1
        reward = self.scenario.real(self.task, action) / STEPS
        return np.array([self.task, self.t]), reward, self.t >= STEPS, False, {}


class ScenarioDynamics:
    """The scenario's world model as dynamics: each imagined step pays half the scenario's
    prediction for ``(task, action)`` (NaN for its invalid one), with its std."""

    def __init__(self, scenario: RoundScenario, model: ScenarioWorldModel) -> None:
        self.scenario, self.model = scenario, model

    def predict_step(self, observations: np.ndarray, actions: np.ndarray) -> StepPrediction:
        tasks = np.asarray(observations)[:, 0].round().astype(int)
        picked = np.asarray(actions, dtype=np.float64).reshape(len(tasks), -1)[:, 0]
        scores, std = self.model.predict(list(tasks), list(picked.round().astype(int)))
        nxt = np.asarray(observations, dtype=np.float64).copy()
        nxt[:, 1] += 1
        return StepPrediction(
            nxt, np.asarray(scores) / STEPS, nxt[:, 1] >= STEPS, np.asarray(std) / STEPS
        )


class TestVectorEnvMultiStepRound(AnchoredRoundContract):
    """The vector env's multi-step round (a dynamics world model, the default open shadow):
    the breaker, the gate's decay, clusters and std at the gate, forced groups and the
    metrics' names apply; screening and known failures do not, and ``ppi`` is refused with
    the open shadow (its check: :class:`TestRobotBenchRound`, on the closed shadow)."""

    screens = False

    def make_fusion(self, seed: int, method: str = "wmrl", **options) -> RecordingFusion:
        return super().make_fusion(seed, method, **options)

    def _env(self, fusion: RewardFusion, executor, limit=32, world_model=None):
        s = self.scenario
        return WorldModelVectorEnv(
            lambda: ScenarioWalk(s, executor),
            ScenarioDynamics(s, world_model or ScenarioWorldModel(s)),
            num_groups=s.num_tasks,
            group_size=s.group_size,
            fusion=fusion,
            executor="inline",
            max_episode_steps=STEPS,
            update_world_model=False,
            max_infrastructure_failures=limit,
        )

    def _round(self, envs, seed):
        s = self.scenario
        obs, _ = envs.reset(seed=seed)
        tasks = [round(float(o[0])) for o in obs[:: s.group_size]]
        actions = np.array([[float(a)] for _ in tasks for a in range(s.group_size)])
        per_env = [(t, a) for t in tasks for a in range(s.group_size)]
        while True:
            _, _, terminated, truncated, info = envs.step(actions)
            if (terminated | truncated).all():
                return info, per_env

    def play(self, fusion, seed, executor, *, world_model=None, execute_per_group=None):
        assert execute_per_group is None
        s = self.scenario
        envs = self._env(fusion, executor, 32, world_model)
        try:
            info, per_env = self._round(envs, seed)
        finally:
            envs.close()
        return PlayedRound(
            info["fused_reward"],
            self._truth(info, per_env),
            [s.kind(t, a) for t, a in per_env],
            samples=per_env,
            advantages=info["advantage"],
            executed=np.isfinite(info["real_score"]),
            known=np.zeros(len(per_env), dtype=bool),  # no known failures on multi-step tasks
            metrics=batch_diagnostics(info),
        )

    def _truth(self, info, per_env) -> np.ndarray:
        """Each sample's real outcome."""
        return np.array([self.scenario.real(t, a) for t, a in per_env])

    def play_broken(self, limit, executor):
        envs = self._env(self.make_fusion(0), executor, limit)
        try:
            for seed in range(8):
                self._round(envs, seed)
        finally:
            envs.close()

    def test_ppi_expected_reward_is_the_real_outcome_for_every_kind_of_sample(self) -> None:
        pytest.skip(
            "multi-step: ppi is refused with the open shadow; the closed shadow's check runs on "
            "the robot bench's round (TestRobotBenchRound)"
        )

    def test_screening_never_executes_a_known_outcome(self) -> None:
        pytest.skip(
            "multi-step: no known failures (known_failure needs an outcome task) and no screening"
        )

    def _two_rounds(self) -> tuple[RecordingFusion, set[int]]:
        """Two rounds on one env and fusion (the env draws each group's task, so the fusion
        sees tasks recur); the fusion and the tasks played."""
        fusion = self.make_fusion(0)
        envs = self._env(fusion, ScenarioExecutor(self.scenario))
        tasks: set[int] = set()
        try:
            for seed in range(2):
                _, per_env = self._round(envs, seed)
                tasks |= {t for t, _ in per_env}
        finally:
            envs.close()
        assert len(fusion.calls) == 2
        return fusion, tasks

    def test_clusters_and_std_reach_the_gate(self) -> None:
        """The clusters half: one label per task, the same across rounds."""
        fusion, tasks = self._two_rounds()
        labels = {c for call in fusion.calls for c in call["clusters"]}
        assert len(labels) == len(tasks)

    def test_the_imagined_episodes_std_reaches_the_gate(self) -> None:
        fusion, _ = self._two_rounds()
        for call in fusion.calls:
            std = call.get("wm_std")
            assert std is not None, "the fusion's gate got no world-model std"
            valid = np.asarray(call["wm_valid"])
            assert np.isfinite(np.asarray(std)[valid]).all()


class ParkedScenarioWalk(ScenarioWalk):
    """The walk with the snapshots a robot-bench env has: the bench keeps at most
    ``workers`` real envs alive and parks the other episodes in progress."""

    def get_snapshot(self):
        return (self.task, self.t)

    def restore_snapshot(self, snapshot):
        self.task, self.t = snapshot
        return np.array([self.task, float(self.t)]), {"task_id": self.task}


class TaskPolicy:
    """A robot-bench policy whose mean action depends on the task alone (``task mod 2``).
    The closed shadow keeps each anchor's noise (its real action minus that mean), and the
    imagined states keep the task, so the shadow replays the anchor's own actions: the
    world-model episode of a member's actions, the pairing PPI's correction needs. The
    imagined episodes that rank groups for ``--uncertainty-anchors`` play the mean, whose
    std differs by task."""

    instruction = "walk"

    def __call__(self, observations: np.ndarray, instructions: list[str]) -> np.ndarray:
        assert len(instructions) == len(observations)
        return self.mean(observations)

    @staticmethod
    def mean(observations: np.ndarray) -> np.ndarray:
        tasks = np.asarray(observations)[:, :1].round()
        return (tasks % 2).astype(np.float32)


@pytest.mark.torch
class TestRobotBenchRound(TestVectorEnvMultiStepRound):
    """The robot bench's own round (:func:`~wmrl_env.bench.robotics.runner.arm_envs`: its
    thread pool of real envs, the closed shadow played by the policy, method ``ppi``) on the
    scenario's walk instead of robosuite. With the closed shadow, ``ppi`` applies, so PPI's
    Monte-Carlo check runs here too: the closed shadow replays each anchor's own actions
    (:class:`TaskPolicy`)."""

    draws = 600
    arm = "ppi"
    uncertainty_anchors = False

    def make_fusion(self, seed: int, method: str = "ppi", **options) -> RecordingFusion:
        return AnchoredRoundContract.make_fusion(self, seed, method, **options)

    def _env(self, fusion: RewardFusion, executor, limit=32, world_model=None):
        from wmrl_env.bench.robotics.config import RobotBenchConfig
        from wmrl_env.bench.robotics.runner import arm_envs

        s = self.scenario
        config = RobotBenchConfig(
            arms=(self.arm,), num_groups=s.num_tasks, group_size=s.group_size,
            anchor_fraction=s.anchor_fraction, workers=2,
            uncertainty_anchors=self.uncertainty_anchors,
        )  # fmt: skip
        assert config.shadow == "closed"  # the bench's default
        model = ScenarioDynamics(s, world_model or ScenarioWorldModel(s))
        walk = lambda: ParkedScenarioWalk(s, executor)  # noqa: E731
        return arm_envs(
            config, self.arm, walk, model, fusion, TaskPolicy(), STEPS,
            update_world_model=False, max_infrastructure_failures=limit,
        )  # fmt: skip

    def _truth(self, info, per_env) -> np.ndarray:
        """Each sample's real outcome, that of the steps it played: a member whose imagined
        step goes invalid is truncated there and replayed for real as far
        (:mod:`~wmrl_env.wrappers.dynamics`), each step paying ``real / STEPS``."""
        played = np.asarray(info["episode_length"], dtype=np.float64)
        return super()._truth(info, per_env) * played / STEPS

    def test_ppi_expected_reward_is_the_real_outcome_for_every_kind_of_sample(self) -> None:
        """The contract's check, every kind a multi-step round has (no known failures): a
        normal member, the invalid prediction (its group run for real with ``pi = 1``,
        drawn or not) and its siblings."""
        executor = ScenarioExecutor(self.scenario)
        rounds = [self.play(self.make_fusion(seed), seed, executor) for seed in range(self.draws)]
        found = check_unbiased(rounds)
        assert set(found) == set(KINDS) - {"known_failure"}, found


@pytest.mark.torch
class TestRobotBenchUncertaintyRound(TestRobotBenchRound):
    """The robot bench's round with ``--uncertainty-anchors``: groups drawn by the std of the
    policy's imagined episodes from their starts, with unequal inclusion probabilities."""

    uncertainty_anchors = True

    def test_the_draw_is_not_uniform(self) -> None:
        drawn = set()
        for seed in range(8):
            fusion = self.make_fusion(seed)
            self.play(fusion, seed, ScenarioExecutor(self.scenario))
            pi = fusion.calls[-1]["out"].inclusion
            drawn |= set(np.round(pi[np.isfinite(pi) & (pi < 1)], 9).tolist())  # not forced
        assert len(drawn) > 1, f"inclusion probabilities {drawn}: the draw looks uniform"


@pytest.mark.parametrize("shadow", ["open", "closed"])
def test_a_drawn_group_whose_closed_shadow_goes_invalid_runs_with_pi_1(shadow) -> None:
    """The closed shadow is the episode a drawn group would have imagined undrawn: when it
    goes invalid, the group would have run for real either way (``pi = 1``). The open shadow
    reads the real states, so a drawn group keeps its draw's ``pi``. A replayed group (not
    drawn, its imagined episode invalid, truncated there) has ``pi = 1`` under both."""
    s = TestVectorEnvMultiStepRound.scenario
    drawn_pi, replayed_pi = [], []
    for seed in range(12):
        executor = ScenarioExecutor(s)
        envs = WorldModelVectorEnv(
            functools.partial(ScenarioWalk, s, executor),
            ScenarioDynamics(s, ScenarioWorldModel(s)),
            num_groups=s.num_tasks,
            group_size=s.group_size,
            fusion=RewardFusion(method="wmrl", anchor_fraction=0.5, seed=seed),
            executor="inline",
            max_episode_steps=STEPS,
            update_world_model=False,
            shadow=shadow,
            imagination_policy=None if shadow == "open" else TaskPolicy().mean,
        )
        try:
            info, _ = TestVectorEnvMultiStepRound()._round(envs, seed)
        finally:
            envs.close()
        for i in np.flatnonzero(~np.asarray(info["wm_valid"])):
            assert info["is_anchor"][i]
            full = info["episode_length"][i] == STEPS  # drawn: its real episode played whole
            (drawn_pi if full else replayed_pi).append(float(info["inclusion_probability"][i]))
    assert drawn_pi and replayed_pi, "the seeds did not draw both kinds of group"
    assert replayed_pi == [1.0] * len(replayed_pi)
    assert drawn_pi == [1.0 if shadow == "closed" else 0.5] * len(drawn_pi)
