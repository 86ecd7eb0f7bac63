"""What Stable-Baselines3 receives from SB3VecEnv: the fusion weights carried into the rewards
(so PPO's advantage is the weighted group advantage), and episode statistics on real returns."""

from __future__ import annotations

import numpy as np
import pytest
from testing_env import BanditEnv, BanditWorldModel

from wmrl_env import RewardFusion, WorldModelVectorEnv
from wmrl_env.utils.imports import is_sb3_available

if is_sb3_available():  # else the sb3 marker skips every test (or fails them in CI)
    import stable_baselines3 as sb3

    from wmrl_env.integrations.sb3 import SB3VecEnv

pytestmark = pytest.mark.sb3

PAYOFF = np.array([[0.0, 0.2, 1.0, 0.5], [0.9, 0.0, 0.1, 0.3], [0.4, 0.6, 0.0, 1.0]])
GROUP = 4


def bandit_envs(method="wmrl", seed=0):
    return WorldModelVectorEnv(
        lambda: BanditEnv(PAYOFF, noise=0.1),
        BanditWorldModel(PAYOFF, scale=0.5, bias=0.2),
        num_groups=8,
        group_size=GROUP,
        fusion=RewardFusion(method=method, anchor_fraction=0.25, min_pairs=2, seed=seed),
        executor="inline",
    )


def rounds(envs, n, seed=0):
    rng = np.random.default_rng(seed)
    envs.seed(seed)
    envs.reset()
    for _ in range(n):
        _, rewards, _, infos = envs.step(rng.integers(0, 4, envs.num_envs))
        yield rewards, infos


def test_weighted_rewards_carry_the_fusion_weights() -> None:
    weighted, fused = SB3VecEnv(bandit_envs()), SB3VecEnv(bandit_envs(), rewards="fused")
    saw_weights = False
    for (r_w, infos_w), (r_f, _) in zip(rounds(weighted, 6), rounds(fused, 6), strict=True):
        x = np.array([i["fused_reward"] for i in infos_w])
        w = np.array([i["weight"] for i in infos_w])
        saw_weights |= bool((w != 1).any())
        for g in range(len(x) // GROUP):
            members = slice(g * GROUP, (g + 1) * GROUP)
            level = r_f[members].mean()  # the group's level (test_sb3_critic: which one)
            # "fused": the fusion's deviations around the level, the weights dropped
            np.testing.assert_allclose(
                r_f[members] - level, x[members] - x[members].mean(), atol=1e-6
            )
            # "weighted": the same level, deviations scaled by the group's weight
            np.testing.assert_allclose(r_w[members].mean(), level, atol=1e-6)
            np.testing.assert_allclose(
                r_w[members] - level, w[members] * (x[members] - x[members].mean()), atol=1e-6
            )
    assert saw_weights, "kappa never left 1: the test did not exercise the weights"
    weighted.close()
    fused.close()


def test_debias_rewards_are_unchanged_by_weighting() -> None:
    weighted = SB3VecEnv(bandit_envs("debias"))
    fused = SB3VecEnv(bandit_envs("debias"), rewards="fused")
    for (r_w, _), (r_f, _) in zip(rounds(weighted, 3), rounds(fused, 3), strict=True):
        np.testing.assert_array_equal(r_w, r_f)
    weighted.close()
    fused.close()


def test_ppo_episode_statistics_report_real_returns_of_anchors() -> None:
    envs = SB3VecEnv(bandit_envs(), episode_returns="real")
    seen = []
    for _, infos in rounds(envs, 3):
        for info in infos:
            if "episode" in info:
                assert info["is_anchor"] and info["episode"]["r"] == info["real_score"]
                seen.append(info["episode"]["r"])
            else:
                assert not info["is_anchor"]
    assert len(seen) == 3 * 2 * GROUP  # 2 anchor groups of 8 per round
    model = sb3.PPO("MlpPolicy", envs, n_steps=4, batch_size=64, n_epochs=1, seed=0)
    model.learn(total_timesteps=envs.num_envs * 8)
    # 8 rounds, 2 anchor groups each: only anchor episodes reach SB3's statistics
    assert len(model.ep_info_buffer) == 8 * 2 * GROUP
    assert all(np.isfinite(e["r"]) and e["l"] == 1 for e in model.ep_info_buffer)
    envs.close()


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="rewards must be one of"):
        SB3VecEnv(bandit_envs(), rewards="advantage")
    with pytest.raises(ValueError, match="episode_returns must be one of"):
        SB3VecEnv(bandit_envs(), episode_returns="wm")
