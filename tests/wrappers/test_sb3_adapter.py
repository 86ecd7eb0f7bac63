"""Stable-Baselines3 trains through the adapter; SB3's own checks pass on the wrapped envs."""

from __future__ import annotations

import numpy as np
import pytest
from testing_env import BanditEnv, BanditWorldModel, PointMassEnv, PointMassModel, TextTaskEnv

from wmrl_env import RewardFusion, WorldModelVectorEnv, WorldModelWrapper
from wmrl_env.utils.imports import is_sb3_available

if is_sb3_available():  # else the sb3 marker skips every test (or fails them in CI)
    import stable_baselines3 as sb3
    import torch
    from stable_baselines3.common.env_checker import check_env as sb3_check_env
    from stable_baselines3.common.vec_env import VecCheckNan, VecMonitor

    from wmrl_env.integrations.sb3 import SB3VecEnv

pytestmark = pytest.mark.sb3

PAYOFF = np.array([[0.0, 0.2, 1.0, 0.5], [0.9, 0.0, 0.1, 0.3], [0.4, 0.6, 0.0, 1.0]])


def bandit_envs(fail_action=None, **kwargs):
    return WorldModelVectorEnv(
        lambda: BanditEnv(PAYOFF, noise=0.1, fail_action=fail_action),
        BanditWorldModel(PAYOFF, scale=0.5, bias=0.2),
        num_groups=4,
        group_size=4,
        fusion=RewardFusion(method="wmrl", anchor_fraction=0.25, seed=0),
        executor="inline",
        **kwargs,
    )


def test_vec_env_contract() -> None:
    envs = SB3VecEnv(bandit_envs())
    envs.seed(3)
    obs = envs.reset()
    assert isinstance(obs, np.ndarray) and obs.shape == (16,)
    assert envs.reset_infos[0]["is_anchor"] in (True, False)
    obs2, rewards, dones, infos = envs.step(np.zeros(16, dtype=np.int64))
    assert rewards.dtype == np.float32 and dones.all() and len(infos) == 16
    assert "terminal_observation" in infos[0] and "advantage" in infos[0]
    assert obs2.shape == (16,)  # already the next round's observations
    assert envs.env_is_wrapped(object) == [False] * 16
    assert envs.get_attr("num_groups") == [4] * 16
    envs.close()
    envs.close()


def test_seed_reproduces_the_round() -> None:
    results = []
    for _ in range(2):
        envs = SB3VecEnv(bandit_envs())
        envs.seed(7)
        results.append(envs.reset())
        envs.close()
    np.testing.assert_array_equal(*results)


def test_failed_executions_become_failed_reward_and_no_nan_passes() -> None:
    envs = VecCheckNan(
        SB3VecEnv(bandit_envs(fail_action=3), failed_reward=-1.0), raise_exception=True
    )
    envs.reset()
    for _ in range(3):
        _, rewards, _, infos = envs.step(np.full(16, 3, dtype=np.int64))
        anchors = np.array([info["is_anchor"] for info in infos])
        assert (rewards[anchors] == -1.0).all() and np.isfinite(rewards).all()
    envs.close()


def test_multi_step_rounds_end_together() -> None:
    venv = WorldModelVectorEnv(
        PointMassEnv,
        PointMassModel(),
        num_groups=2,
        group_size=2,
        fusion=RewardFusion(seed=0),
        executor="inline",
        max_episode_steps=3,
    )
    envs = SB3VecEnv(venv)
    envs.reset()
    dones_seen = [envs.step(np.zeros((4, 1), np.float32))[2] for _ in range(3)]
    assert [d.all() for d in dones_seen] == [False, False, True]
    envs.close()


def test_text_observations_are_refused() -> None:
    venv = WorldModelVectorEnv(
        TextTaskEnv, BanditWorldModel(PAYOFF), num_groups=1, group_size=2, executor="inline"
    )
    with pytest.raises(ValueError, match="Text"):
        SB3VecEnv(venv)
    venv.close()


def test_sb3_check_env_on_the_single_env_wrapper() -> None:
    env = WorldModelWrapper(BanditEnv(PAYOFF), BanditWorldModel(PAYOFF, 0.5, 0.2), 0.3)
    sb3_check_env(env, warn=True)


@pytest.mark.slow
def test_ppo_trains_on_the_adapter() -> None:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        envs = VecMonitor(SB3VecEnv(bandit_envs()))
        model = sb3.PPO(
            "MlpPolicy",
            envs,
            n_steps=8,
            batch_size=64,
            n_epochs=2,
            seed=0,
            learning_rate=3e-3,
            policy_kwargs={"net_arch": [16]},
            device="cpu",
        )
        model.learn(total_timesteps=16 * 8 * 6)
        obs = np.arange(3)
        actions, _ = model.predict(obs, deterministic=True)
        envs.close()
    finally:
        torch.set_num_threads(threads)
    assert actions.shape == (3,)
    assert np.mean(PAYOFF[obs, actions]) > 0.7
