"""What SB3's critic receives from SB3VecEnv under the gated methods: rewards at a level it
can learn (world-model groups at their calibrated mean, PPI's anchor groups at their real
mean), and a PPO run on the demo bandit whose critic learns the real value no worse under
``wmrl`` than under ``real`` (with ``rewards="fused"``: the weights of ``"weighted"`` scale
anchor deviations up on purpose, which a critic sees as noise; docs/wrappers.md)."""

from __future__ import annotations

import numpy as np
import pytest

from wmrl_env import RewardFusion, WorldModelVectorEnv
from wmrl_env.demo import BanditTaskEnv, BanditTasks, HackableWorldModel
from wmrl_env.utils.imports import is_sb3_available

if is_sb3_available():  # else the sb3 marker skips every test (or fails them in CI)
    import stable_baselines3 as sb3
    import torch

    from wmrl_env.integrations.sb3 import SB3VecEnv

pytestmark = pytest.mark.sb3

GROUPS, GROUP = 8, 8


def bandit(method: str, seed: int, rewards: str = "weighted") -> SB3VecEnv:
    """The demo bandit, its world model honest but for noise and a monotone distortion."""
    tasks = BanditTasks.sample(
        np.random.default_rng(seed), num_tasks=8, num_answers=4, exploits_per_task=0
    )
    fusion = RewardFusion(method=method, anchor_fraction=0.25, min_pairs=8, seed=seed)
    envs = WorldModelVectorEnv(
        lambda: BanditTaskEnv(tasks),
        HackableWorldModel(tasks, seed=seed),
        num_groups=GROUPS,
        group_size=GROUP,
        fusion=fusion,
        executor="inline",
    )
    return SB3VecEnv(envs, rewards=rewards)


def group_means(values: np.ndarray) -> np.ndarray:
    return values.reshape(GROUPS, GROUP).mean(axis=1)


@pytest.mark.parametrize("method", ["wmrl", "ppi"])
def test_rewards_sit_at_the_level_a_critic_can_learn(method) -> None:
    envs = bandit(method, seed=0, rewards="fused")
    envs.seed(0)
    envs.reset()
    rng = np.random.default_rng(0)
    for _ in range(4):
        _, rewards, _, infos = envs.step(rng.integers(0, 4, envs.num_envs))
        anchor = group_means(np.array([i["is_anchor"] for i in infos], dtype=float)) == 1
        fused = np.array([i["fused_reward"] for i in infos])
        calibrated = np.array([i["calibrated_score"] for i in infos])
        real = np.array([i["real_score"] for i in infos])
        means = group_means(rewards.astype(float))
        # world-model groups at their mean calibrated score (not lam * f, near 0 when shut)
        np.testing.assert_allclose(means[~anchor], group_means(calibrated)[~anchor], atol=1e-6)
        if method == "ppi":  # anchor groups at their real mean, not r / pi's swing
            np.testing.assert_allclose(means[anchor], group_means(real)[anchor], atol=1e-6)
        # the deviations within each group, and so PPO's advantages, are the fusion's own
        deviations = rewards - np.repeat(means, GROUP)
        np.testing.assert_allclose(
            deviations, fused - np.repeat(group_means(fused), GROUP), atol=1e-6
        )
    envs.close()


def critic_value_error(method: str, seed: int, rounds: int = 40) -> float:
    """PPO on the bandit; RMS over tasks of the critic's V(task) minus the trained policy's
    true expected success (what a critic should learn: the real value)."""
    envs = bandit(method, seed, rewards="fused")
    model = sb3.PPO(
        "MlpPolicy",
        envs,
        n_steps=1,
        batch_size=GROUPS * GROUP,
        n_epochs=10,
        learning_rate=1e-2,
        seed=seed,
        device="cpu",
    )
    model.learn(total_timesteps=envs.num_envs * rounds)
    envs.close()
    success = BanditTasks.sample(
        np.random.default_rng(seed), num_tasks=8, num_answers=4, exploits_per_task=0
    ).success
    with torch.no_grad():
        obs, _ = model.policy.obs_to_tensor(np.arange(success.shape[0]))
        values = model.policy.predict_values(obs).flatten().numpy()
        probs = model.policy.get_distribution(obs).distribution.probs.numpy()
    return float(np.sqrt(np.mean((values - (probs * success).sum(axis=1)) ** 2)))


@pytest.mark.slow
def test_the_critic_learns_the_real_value_under_wmrl_no_worse_than_under_real() -> None:
    """A non-inferiority test over 4 paired seeds (same tasks, same PPO seed):
    d = error(wmrl) - error(real), the critic's RMS error against the true value of the
    trained policy. The one-sided 95 % upper confidence bound of mean(d),
    mean(d) + t(0.95, 3 dof) * sd(d) / sqrt(4) with t = 2.353 (the Monte-Carlo error measured
    from the seeds themselves), must stay under 0.05 (5 % of the value's range)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny networks: more threads only contend on a busy machine
    try:
        d = np.array(
            [critic_value_error("wmrl", s) - critic_value_error("real", s) for s in range(4)]
        )
    finally:
        torch.set_num_threads(threads)
    upper = d.mean() + 2.353 * d.std(ddof=1) / np.sqrt(d.size)
    assert upper <= 0.05, f"error(wmrl) - error(real) per seed: {np.round(d, 3)}, bound {upper:.3f}"
