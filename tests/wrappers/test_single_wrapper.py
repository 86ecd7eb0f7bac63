"""``WorldModelWrapper``: one env, per-episode anchors, calibration across episodes."""

from __future__ import annotations

import math

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from testing_env import BanditEnv, BanditWorldModel, CallLog, PointMassEnv, PointMassModel

from wmrl_env import WorldModelWrapper

PAYOFF = np.array([[0.0, 0.2, 1.0, 0.5], [0.9, 0.0, 0.1, 0.3], [0.4, 0.6, 0.0, 1.0]])


def bandit(log=None, p=0.3, world_model=None, **kwargs):
    env = BanditEnv(PAYOFF, noise=0.05, log=log, fail_action=kwargs.pop("fail_action", None))
    return WorldModelWrapper(env, world_model or BanditWorldModel(PAYOFF, 0.5, 0.2), p, **kwargs)


def test_check_env_outcome() -> None:
    check_env(bandit(), skip_render_check=True)


def test_check_env_multi_step() -> None:
    env = WorldModelWrapper(PointMassEnv(), PointMassModel(), 0.5, max_episode_steps=5)
    check_env(env, skip_render_check=True)


def test_anchor_share_and_only_anchors_step_the_real_env() -> None:
    log = CallLog()
    env = bandit(log, p=0.3)
    anchors, episodes = 0, 2000
    env.reset(seed=0)
    for _ in range(episodes):
        _, info = env.reset()
        _, _, _, _, info = env.step(env.action_space.sample())
        anchors += info["is_anchor"]
        assert (info["exec_status"] == "ok") == info["is_anchor"]
    # binomial(2000, 0.3): sd = 20.5; 4 sd
    assert abs(anchors - 0.3 * episodes) < 4 * math.sqrt(episodes * 0.3 * 0.7)
    assert log.count("step") == anchors


def test_calibration_across_episodes_removes_the_bias() -> None:
    """wm = 0.5 * payoff + 0.2: calibrated world-model rewards approach the payoff."""
    env = bandit(p=0.5)
    env.reset(seed=1)
    errors = []
    for episode in range(1500):
        obs, _ = env.reset()
        action = env.action_space.sample()
        _, reward, _, _, info = env.step(action)
        if episode >= 1000 and not info["is_anchor"]:
            errors.append(reward - PAYOFF[obs, action])
    raw_error = np.mean(np.abs(0.5 * PAYOFF + 0.2 - PAYOFF))
    # the real noise (sd 0.05) bounds how well 500 calibration pairs can do
    assert np.mean(np.abs(errors)) < 0.25 * raw_error


class NoisyWorldModel(BanditWorldModel):
    """The payoff plus fresh Gaussian noise on every prediction."""

    def __init__(self, noise: float, seed: int = 0) -> None:
        super().__init__(PAYOFF)
        self.noise, self.rng = noise, np.random.default_rng(seed)

    def predict(self, contexts, actions):
        scores = super().predict(contexts, actions)
        return scores + self.rng.normal(0.0, self.noise, len(scores))


def _kappa_and_last_info(world_model) -> tuple[float, dict]:
    env = bandit(p=0.5, world_model=world_model)
    env.reset(seed=2)
    for _ in range(600):
        env.reset()
        _, _, _, _, info = env.step(env.action_space.sample())
    return info["kappa"], info


def test_weights_follow_kappa() -> None:
    exact, _ = _kappa_and_last_info(BanditWorldModel(PAYOFF))
    noisy, info = _kappa_and_last_info(NoisyWorldModel(noise=1.0))
    assert exact < 1.1 < 1.4 < noisy
    p = 0.5
    expected = (noisy if info["is_anchor"] else 1.0) / (noisy * p + 1 - p)
    assert info["weight"] == pytest.approx(expected)


def test_the_wrapper_learns_through_the_fusion() -> None:
    """Calibration and kappa are the fusion's own sequence (observe_anchors), not a copy:
    a RewardFusion fed the same anchor pairs ends with the same map and kappa."""
    from wmrl_env.fusion import RewardFusion

    env = bandit(p=0.5, world_model=NoisyWorldModel(noise=0.3), pairs_per_update=8)
    twin = RewardFusion(method="wmrl", window=8, decay=0.8, min_pairs=8, centre_groups=False)
    assert isinstance(env.fusion, RewardFusion)
    env.reset(seed=3)
    pairs = []
    for _ in range(300):
        env.reset()
        _, _, _, _, info = env.step(env.action_space.sample())
        if info["is_anchor"]:
            pairs.append((info["wm_score"], info["real_score"]))
        if len(pairs) == 8:
            twin.observe_anchors(*(np.array(v) for v in zip(*pairs, strict=True)))
            pairs = []
    probe = np.linspace(0, 1, 11)
    np.testing.assert_array_equal(
        env.fusion.calibrator.transform(probe), twin.calibrator.transform(probe)
    )
    assert info["kappa"] == twin.kappa_estimator.kappa > 1.0


def test_the_wrapper_needs_a_calibrating_fusion() -> None:
    from wmrl_env.fusion import RewardFusion

    with pytest.raises(ValueError, match="'wmrl', 'debias' or 'ppi'"):
        bandit(fusion=RewardFusion(method="denoise"))


def test_failed_real_step_falls_back_to_the_world_model() -> None:
    env = bandit(p=1.0, fail_action=2)
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step(2)
    assert terminated and info["exec_status"] == "error" and "sandbox broke" in info["exec_message"]
    assert math.isnan(info["real_score"]) and reward == info["calibrated_score"]


class GarbageOnTwo(BanditEnv):
    """Action 2 yields a NaN reward: ``invalid_output``, the program's own failure."""

    def step(self, action):
        observation, reward, terminated, truncated, info = super().step(action)
        return observation, math.nan if int(action) == 2 else reward, terminated, truncated, info


def test_a_program_failure_is_scored_at_the_failure_score() -> None:
    """Issue 23, item 7: a non-finite reward is the program's failure: it scores the score
    range's minimum (it fell back to the world model's score before), and is a pair."""
    env = WorldModelWrapper(
        GarbageOnTwo(PAYOFF), BanditWorldModel(PAYOFF, 0.5, 0.2), 1.0, score_range=(0.0, 1.0)
    )
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step(2)
    assert terminated and info["exec_status"] == "invalid_output"
    assert info["real_score"] == 0.0 and reward == 0.0
    assert len(env._pending) == 1  # a calibration pair, like any real score


def test_invalid_prediction_goes_to_the_real_env() -> None:
    log = CallLog()
    env = bandit(log, p=0.0, world_model=BanditWorldModel(PAYOFF, invalid_actions=[1]))
    obs, _ = env.reset(seed=0)
    _, reward, _, _, info = env.step(1)
    assert info["is_anchor"] and not info["wm_valid"] and log.count("step") == 1
    assert reward == pytest.approx(PAYOFF[obs, 1], abs=0.3)


def test_seeding_determinism() -> None:
    runs = []
    for _ in range(2):
        env = bandit()
        env.reset(seed=5)
        rewards = []
        for _ in range(30):
            env.reset()
            rewards.append(env.step(1)[1])
        runs.append(rewards)
    assert runs[0] == runs[1]


def test_multi_step_episode_returns_add_up() -> None:
    """Imagined episodes' rewards sum to the shrunk calibrated return, real ones' to the real
    return."""
    env = WorldModelWrapper(
        PointMassEnv(),
        PointMassModel(reward_bias=0.1),
        0.5,
        max_episode_steps=4,
        pairs_per_update=2,
    )
    env.reset(seed=0)
    seen = set()
    for _ in range(30):
        obs, _ = env.reset()
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, info = env.step(np.sign(obs) * 0.5)
            total += reward
            done = terminated or truncated
        _, reals = env.fusion.calibrator.window_pairs()
        level = reals.mean() if reals.size else info["calibrated_score"]
        shrunk = level + info["wm_weight"] * (info["calibrated_score"] - level)
        expected = info["real_score"] if info["is_anchor"] else shrunk
        assert total == pytest.approx(expected) and total == pytest.approx(info["fused_reward"])
        if info["is_anchor"]:
            assert info["wm_score"] == pytest.approx(info["real_score"] + 0.4, abs=1e-5)
        seen.add(info["is_anchor"])
    assert seen == {True, False}


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="anchor_probability"):
        bandit(p=1.5)
    with pytest.raises(ValueError, match="max_episode_steps"):
        WorldModelWrapper(PointMassEnv(), PointMassModel())
    env = bandit()
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)


class RandomWorldModel(BanditWorldModel):
    """Uniform random scores: no information about the payoff."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__(PAYOFF)
        self.rng = np.random.default_rng(seed)

    def predict(self, contexts, actions):
        return self.rng.uniform(size=len(contexts))


def _world_model_episodes(world_model, seed: int, episodes: int = 1500) -> tuple[float, float]:
    """The second half's std of rewards over std of calibrated scores (world-model episodes
    only) and the last wm_weight, from one seeded run."""
    env = bandit(p=0.3, world_model=world_model)
    env.reset(seed=seed)
    env.action_space.seed(seed)
    rewards, calibrated = [], []
    for episode in range(episodes):
        env.reset()
        _, reward, _, _, info = env.step(env.action_space.sample())
        if episode >= episodes // 2 and not info["is_anchor"]:
            rewards.append(reward)
            calibrated.append(info["calibrated_score"])
    return float(np.std(rewards) / np.std(calibrated)), float(info["wm_weight"])


def test_the_wrapper_gates_a_useless_world_model_across_episodes() -> None:
    """Issue 23, item 7: the wrapper used to report wm_weight 0 while handing out calibrated
    world-model rewards at full weight (ratio 1). Now the gate (pooled across episodes)
    shrinks them: a random world model's rewards sit near the level, an exact one keeps its
    weight. A useless model still opens the gate briefly in some runs (the documented
    per-run false opening), so the claim is read as the median of 5 seeded runs: over 30
    seeds the ratio spanned 0.15-0.51 (median 0.29, 1 of 30 above 0.5), so the median of 5
    exceeds 0.5 only if 3 of 5 do (probability ~ 10 * (1/30)^3 < 1e-3)."""
    random_runs = [_world_model_episodes(RandomWorldModel(seed), seed) for seed in range(5)]
    ratios, weights = np.array(random_runs).T
    assert np.median(ratios) < 0.5  # before: rewards == calibrated, ratio 1
    assert np.median(weights) < 0.2
    exact_runs = [_world_model_episodes(BanditWorldModel(PAYOFF, 0.5, 0.2), s) for s in range(2)]
    ratios, weights = np.array(exact_runs).T
    assert (weights > 0.8).all()
    assert (ratios > 0.8).all()
