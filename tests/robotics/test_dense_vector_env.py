"""The dense progress reward as an option of the vector env (``progress_reward=``) and the
one-call set-up of the VLA integration: real members pay what the hand-wrapped env pays, the
co-evolution runs once per round without user code, and configurations that cannot share the
reward are refused."""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils import seeding
from test_dense_reward import Line, _model

from wmrl_env import RewardFusion, WorldModelVectorEnv
from wmrl_env.env_executors import GymEnvExecutor
from wmrl_env.robotics.dense_reward import DenseProgressReward, ProgressReward
from wmrl_env.robotics.progress import ProgressModel
from wmrl_env.world_models.base import StepPrediction
from wmrl_env.wrappers import batch_diagnostics


class Still:
    """A multi-step world model: nothing moves, noise rewards (every group is real here: the
    fusion's diagnostics only need scores that are not constant)."""

    def __init__(self):
        self.rng = np.random.default_rng(0)

    def predict_step(self, observations, actions):
        observations = np.asarray(observations)
        n = len(observations)
        return StepPrediction(observations.copy(), self.rng.random(n), np.zeros(n, bool))


def _vector(env_fn, scorer, num_groups=2, group_size=2, steps=10, **options):
    return WorldModelVectorEnv(
        env_fn, Still(), num_groups, group_size, fusion=RewardFusion("real", seed=0),
        task="dynamics", max_episode_steps=steps, executor=options.pop("executor", "inline"),
        progress_reward=scorer, **options,
    )  # fmt: skip


def _play_round(envs, actions, seed=None):
    """One round with a fixed action per env; the first observations, every step's
    ``(step_reward, active)`` and the last step's observations and info."""
    first, _ = envs.reset(seed=seed)
    steps = []
    while True:
        obs, _, terminated, truncated, info = envs.step(actions)
        steps.append((np.asarray(info["step_reward"]), np.asarray(info["active"]), info))
        if np.all(terminated | truncated):
            return first, steps, obs, info


def _hand_rewards(env, action, seed=0):
    env.reset(seed=seed)
    rewards, done = [], False
    while not done:
        _, reward, terminated, truncated, _ = env.step(action)
        rewards.append(reward)
        done = terminated or truncated
    return rewards


def test_real_members_pay_the_hand_wrapped_envs_dense_reward() -> None:
    model = _model()
    scorer = ProgressReward(model, dense_weight=0.5, calibrate=False, update=False)
    envs = _vector(Line, scorer)
    per_env = [0.25, 0.05, 0.3, 0.08]  # successes at step 4, failures at step 10
    actions = np.array(per_env)[:, None]
    try:
        _, steps, _, info = _play_round(envs, actions, seed=0)
    finally:
        envs.close()
    hand_scorer = ProgressReward(copy.deepcopy(model), dense_weight=0.5, calibrate=False)
    hand = DenseProgressReward(Line(), hand_scorer)
    for i, a in enumerate(per_env):
        expected = _hand_rewards(hand, np.array([a]))
        paid = [float(r[i]) for r, active, _ in steps if active[i]]
        assert paid == pytest.approx(expected, abs=1e-12)
        assert info["real_score"][i] == pytest.approx(sum(expected), abs=1e-12)
    # the dense part is there: a failure's return is half its progress, not 0
    assert info["real_score"][1] > 0.05 and info["real_score"][0] > 0.5


def test_end_round_runs_once_per_round_and_the_model_learns_the_rounds_episodes() -> None:
    scorer = ProgressReward(_model(), dense_weight=0.5, calibrate=True, min_pairs=4)
    calls = []
    end_round = scorer.end_round
    scorer.end_round = lambda: calls.append(1) or end_round()
    before = len(scorer.model.states)
    envs = _vector(Line, scorer)
    actions = np.array([0.25, 0.05, 0.3, 0.08])[:, None]
    try:
        for r in (1, 2):
            _, steps, _, info = _play_round(envs, actions, seed=0 if r == 1 else None)
            assert len(calls) == r
            assert all("progress_check" not in i.get("batch", {}) for _, _, i in steps[:-1])
            check = batch_diagnostics(info)["progress_check"]
            assert check["episodes"] == 4 and check["successes"] == 2
            assert check["progress_episodes"] == before + 4 * r  # learnt from, so far
            assert check["calibration"]["calibration"] == "affine"
            assert not scorer.episodes
    finally:
        envs.close()
    assert len(scorer.model.states) == before + 8


class TextLine(Line):
    observation_space = gym.spaces.Text(8)


class Guess:  # an outcome world model
    def predict(self, contexts, actions):
        return np.zeros(len(actions))


def test_configurations_that_cannot_share_the_reward_are_refused() -> None:
    scorer = ProgressReward(_model(), calibrate=False)
    with pytest.raises(ValueError, match="multi-step task"):
        WorldModelVectorEnv(Line, Guess(), 2, 2, progress_reward=scorer)
    with pytest.raises(ValueError, match="executor='thread' or 'inline'"):
        _vector(Line, scorer, executor="process")
    plain = GymEnvExecutor(Line, backend="inline")
    with pytest.raises(ValueError, match=r"progress_reward\.wrap\(env_fn\)"):
        _vector(Line, scorer, executor=plain)
    other = ProgressReward(_model(), calibrate=False)
    with pytest.raises(ValueError, match=r"progress_reward\.wrap\(env_fn\)"):
        _vector(Line, scorer, executor=GymEnvExecutor(other.wrap(Line), backend="inline"))
    plain.close()
    with pytest.raises(ValueError, match="Box observation space"):
        _vector(TextLine, scorer)
    with pytest.raises(TypeError, match="must be a ProgressReward"):
        _vector(Line, object())


def test_an_executor_built_on_the_wrapped_env_fn_is_accepted() -> None:
    scorer = ProgressReward(_model(), calibrate=False)
    executor = GymEnvExecutor(scorer.wrap(Line), backend="thread", num_workers=2, max_envs=2)
    envs = _vector(Line, scorer, executor=executor)
    try:
        _, _, _, info = _play_round(envs, np.full((4, 1), 0.25), seed=0)
    finally:
        envs.close()
    assert batch_diagnostics(info)["progress_check"]["episodes"] == 4


# ---- real robosuite ---------------------------------------------------------------------

CHUNK, CHUNKS = 8, 3  # 24 simulator steps an episode


def _lift():
    from wmrl_env.envs.robosuite import RobosuiteEnv
    from wmrl_env.integrations.vla import ActionChunking

    env = RobosuiteEnv("Lift", horizon=CHUNK * CHUNKS, reward_shaping=False,
                       terminate_on_success=True)  # fmt: skip
    return ActionChunking(env, CHUNK)


def _lift_episodes(count: int = 4) -> list[tuple[np.ndarray, bool]]:
    """A few random-chunk Lift episodes (labelled success and failure in turn: a progress
    model to test the plumbing with, not a good one)."""
    env, rng, episodes = _lift(), np.random.default_rng(0), []
    try:
        for k in range(count):
            states = [env.reset(seed=100 + k)[0]]
            for _ in range(CHUNKS):
                states.append(env.step(rng.uniform(-1, 1, env.action_space.shape))[0])
            episodes.append((np.stack(states), k % 2 == 0))
    finally:
        env.close()
    return episodes


def _chunks(space: gym.Space, n: int) -> np.ndarray:
    return np.random.default_rng(1).uniform(-1, 1, (n, *space.shape)).astype(np.float32)


@pytest.mark.robosuite
def test_on_real_lift_the_vector_env_pays_the_hand_wrapped_dense_reward() -> None:
    pytest.importorskip("robosuite", reason="needs robosuite (pip install 'wmrl-env[robosuite]')")
    model = ProgressModel(seed=0).pretrain(_lift_episodes())
    scorer = ProgressReward(model, dense_weight=1.0, calibrate=False)
    envs = _vector(_lift, scorer, num_groups=1, group_size=2, steps=CHUNKS)
    hand_scorer = ProgressReward(copy.deepcopy(model), dense_weight=1.0, calibrate=False)
    hand = DenseProgressReward(_lift(), hand_scorer)
    try:
        actions = _chunks(envs.single_action_space, 2)
        first, steps, _, info = _play_round(envs, actions, seed=0)
        start_seed = int(seeding.np_random(0)[0].integers(2**31 - 1, size=1)[0])
        start, _ = hand.reset(seed=start_seed)
        assert np.array_equal(start, first[0])  # the group's start, seeded as the vector env does
        for i in range(2):
            expected = _hand_rewards(hand, actions[i], seed=start_seed)
            paid = [float(r[i]) for r, active, _ in steps if active[i]]
            assert paid == pytest.approx(expected, abs=1e-9)
            assert any(abs(r) > 1e-6 for r in paid)  # progress moves: not the sparse 0
        check = batch_diagnostics(info)["progress_check"]
        assert check["episodes"] == 2
        assert check["progress_episodes"] == 4 + 2  # the pretraining's and the round's
    finally:
        envs.close()
        hand.close()


@pytest.mark.robosuite
def test_the_vla_helper_builds_a_dense_progress_set_up_on_lift() -> None:
    pytest.importorskip("robosuite", reason="needs robosuite (pip install 'wmrl-env[robosuite]')")
    from wmrl_env.envs.robosuite import RobosuiteEnv
    from wmrl_env.integrations.vla import dense_progress_envs

    episodes = _lift_episodes()
    envs = dense_progress_envs(
        lambda: RobosuiteEnv("Lift", horizon=CHUNK * CHUNKS, reward_shaping=False,
                             terminate_on_success=True),
        episodes, num_groups=1, group_size=2, chunk_size=CHUNK, dense_weight=1.0,
        calibration=None, max_episode_steps=CHUNKS, executor="inline",
    )  # fmt: skip
    try:
        assert envs.fusion.method == "real" and envs.single_action_space.shape == (CHUNK, 7)
        scorer = envs.progress_reward
        assert scorer.dense_weight == 1.0 and scorer.calibrator is None
        learnt = len(scorer.model.states)
        assert learnt == len(episodes)  # pretrained on the episodes given
        model = copy.deepcopy(scorer.model)  # as it stands during the round
        first, _, last, info = _play_round(envs, _chunks(envs.single_action_space, 2), seed=0)
        # weight 1, no calibration: each return is the progress made, p(last) - p(start)
        made = model.predict(last)[0] - model.predict(first)[0]
        assert np.asarray(info["real_score"]) == pytest.approx(made, abs=1e-9)
        assert np.abs(made).max() > 1e-6
        check = batch_diagnostics(info)["progress_check"]
        assert check["episodes"] == 2 and check["progress_episodes"] == learnt + 2
    finally:
        envs.close()
    with pytest.raises(TypeError, match="predict_step"):  # an outcome world model
        dense_progress_envs(Line, _model(), world_model=Guess(), max_episode_steps=10)
