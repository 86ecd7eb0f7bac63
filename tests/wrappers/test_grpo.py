"""The GRPO loop learns on tiny tasks through ``WorldModelVectorEnv``."""

from __future__ import annotations

import numpy as np
import pytest
from testing_env import (
    BanditEnv,
    BanditWorldModel,
    PointMassEnv,
    PointMassModel,
    TargetEnv,
    TargetWorldModel,
)

from wmrl_env import RewardFusion, WorldModelVectorEnv
from wmrl_env.utils.imports import is_torch_available

if is_torch_available():  # else the torch marker skips every test (or fails them in CI)
    import torch

    from wmrl_env import grpo

pytestmark = pytest.mark.torch


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Tiny policies run fastest on one thread (and do not fight other processes for cores)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


PAYOFF = np.array([[0.0, 0.2, 1.0, 0.5], [0.9, 0.0, 0.1, 0.3], [0.4, 0.6, 0.0, 1.0]])
# the world model over-scores action 1 in context 0 (0.8 instead of 0.2): a hackable reward
HACKED = np.zeros_like(PAYOFF)
HACKED[0, 1] = 0.6


def expected_true_reward(policy) -> float:
    contexts = np.arange(PAYOFF.shape[0])
    with torch.no_grad():
        logits = policy.net(policy.encode(contexts))
    probs = torch.softmax(logits, dim=1).numpy()
    return float(np.mean((probs * PAYOFF).sum(axis=1)))


@pytest.mark.slow
def test_grpo_improves_a_bandit_with_a_biased_world_model() -> None:
    envs = WorldModelVectorEnv(
        lambda: BanditEnv(PAYOFF, noise=0.1),
        BanditWorldModel(PAYOFF, scale=0.5, bias=0.2 + HACKED),
        num_groups=16,
        group_size=8,
        fusion=RewardFusion(method="wmrl", anchor_fraction=0.25, seed=0),
        executor="inline",
    )
    policy = grpo.make_policy(envs.single_observation_space, envs.single_action_space, 0, seed=0)
    before = expected_true_reward(policy)
    config = grpo.GRPOConfig(iterations=40, learning_rate=0.1, seed=0)

    def true_reward(rollout):
        return PAYOFF[rollout.observations[0], rollout.actions[0]]

    rows = []
    history = grpo.train(envs, policy, config, true_reward=true_reward, log=rows.append)
    envs.close()
    after = expected_true_reward(policy)
    assert before < 0.5 and after > 0.85, (before, after)
    assert rows == history and len(history) == 40
    last = history[-1]
    for key in (
        "true_reward_mean",
        "real_reward_mean",
        "kappa",
        "n_anchor_groups",
        "real_exec_seconds",
        "wm_seconds",
        "loss",
        "approx_kl",
        "clipfrac",
    ):
        assert np.isfinite(last[key]), key
    assert last["n_anchor_groups"] == 4


def test_grpo_gaussian_policy_finds_continuous_targets() -> None:
    envs = WorldModelVectorEnv(
        TargetEnv,
        TargetWorldModel(),
        num_groups=12,
        group_size=8,
        fusion=RewardFusion(method="wmrl", anchor_fraction=0.25, seed=0),
        executor="inline",
    )
    policy = grpo.make_policy(envs.single_observation_space, envs.single_action_space, 16, seed=0)
    config = grpo.GRPOConfig(iterations=60, learning_rate=0.03, seed=1)
    history = grpo.train(envs, policy, config, true_reward=lambda r: r.final_info["real_score"])
    envs.close()
    with torch.no_grad():
        means = policy.mean(policy.encode(np.arange(3)))[:, 0].numpy()
    assert np.abs(means - TargetEnv.TARGETS).max() < 0.3, means
    assert np.isfinite(history[-1]["loss"])


def test_grpo_runs_multi_step_rounds() -> None:
    envs = WorldModelVectorEnv(
        PointMassEnv,
        PointMassModel(reward_bias=0.05),
        num_groups=4,
        group_size=4,
        fusion=RewardFusion(method="wmrl", anchor_fraction=0.25, seed=0),
        executor="inline",
        max_episode_steps=5,
    )
    policy = grpo.make_policy(envs.single_observation_space, envs.single_action_space, 8, seed=0)
    history = grpo.train(envs, policy, grpo.GRPOConfig(iterations=3, seed=0))
    envs.close()
    assert all(1 <= row["episode_steps"] <= 5 for row in history)
    assert all(np.isfinite(row["loss"]) for row in history)


def test_policy_protocol_and_log_probs() -> None:
    from gymnasium import spaces

    policy = grpo.make_policy(spaces.Discrete(2), spaces.MultiDiscrete([3, 4]), 8, seed=0)
    assert isinstance(policy, grpo.Policy)
    obs = np.array([0, 1, 1])
    actions, log_probs = policy.act(obs)
    assert actions.shape == (3, 2) and (actions < [3, 4]).all()
    torch.testing.assert_close(policy.log_prob(obs, actions), log_probs)
    again, _ = grpo.make_policy(spaces.Discrete(2), spaces.MultiDiscrete([3, 4]), 8, seed=0).act(
        obs
    )
    np.testing.assert_array_equal(actions, again)  # seeded: no global RNG involved
    with pytest.raises(TypeError, match="encode"):
        grpo.make_policy(spaces.Text(5), spaces.Discrete(2))
    with pytest.raises(ValueError, match="clip_coef"):
        grpo.GRPOConfig(clip_coef=1.5)


def _first_update(optimizer: str, learning_rate: float) -> np.ndarray:
    """Every weight's change in one round with one gradient step (bandit, all real)."""
    envs = WorldModelVectorEnv(
        lambda: BanditEnv(PAYOFF, noise=0.1),
        BanditWorldModel(PAYOFF),
        num_groups=6,
        group_size=8,
        fusion=RewardFusion(method="real", seed=0),
        executor="inline",
    )
    policy = grpo.make_policy(envs.single_observation_space, envs.single_action_space, 0, seed=0)
    before = torch.cat([p.detach().flatten().clone() for p in policy.parameters()])
    config = grpo.GRPOConfig(
        iterations=1, update_epochs=1, learning_rate=learning_rate, optimizer=optimizer, seed=0
    )
    grpo.train(envs, policy, config)
    envs.close()
    return (torch.cat([p.detach().flatten() for p in policy.parameters()]) - before).numpy()


def test_the_configured_optimizer_takes_the_steps() -> None:
    """Adam's first step moves every weight whose gradient is well above its epsilon by the
    learning rate; plain SGD moves each by the rate times its own gradient, whose norm is
    clipped to 1: at most one weight can move by the full rate, and steps are linear in it."""
    at_rate = lambda steps: int(np.isclose(np.abs(steps), 0.01, rtol=1e-3).sum())  # noqa: E731
    adam = _first_update("adam", 0.01)
    assert np.abs(adam).max() <= 0.01 * (1 + 1e-3) and at_rate(adam) >= 10
    sgd = _first_update("sgd", 0.01)
    assert np.linalg.norm(sgd) <= 0.01 * (1 + 1e-5) and at_rate(sgd) <= 1
    assert np.abs(sgd).max() > 0  # it did learn
    assert np.allclose(_first_update("sgd", 0.02), 2 * sgd, atol=1e-7)
    with pytest.raises(ValueError, match="optimizer"):
        grpo.GRPOConfig(optimizer="rmsprop")
