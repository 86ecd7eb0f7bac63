"""Failures scored as failures (issue 23, item 7): a program failure is an outcome scored at
``failure_score``; an infrastructure failure is missing; a run of them stops training."""

from __future__ import annotations

import math

import numpy as np
import pytest
from testing_env import BanditEnv, BanditWorldModel

from wmrl_env import RewardFusion, WorldModelVectorEnv
from wmrl_env.wrappers import InfrastructureFailureError, batch_diagnostics

PAYOFF = np.array([[0.2, 0.4, 1.0, 0.5], [0.9, 0.3, 0.1, 0.3]])
M, G = 4, 4


class GarbageOnThree(BanditEnv):
    """Action 3 yields a NaN reward: ``invalid_output``, the program's own failure."""

    def step(self, action):
        observation, reward, terminated, truncated, info = super().step(action)
        return observation, math.nan if int(action) == 3 else reward, terminated, truncated, info


def all_anchor_envs(env_fn, **kwargs) -> WorldModelVectorEnv:
    return WorldModelVectorEnv(
        env_fn,
        BanditWorldModel(PAYOFF, scale=0.5, bias=0.2),
        num_groups=M,
        group_size=G,
        fusion=RewardFusion(method="wmrl", anchor_fraction=1.0, seed=0),
        executor="inline",
        **kwargs,
    )


def test_a_program_failure_is_scored_at_the_score_ranges_minimum() -> None:
    envs = all_anchor_envs(lambda: GarbageOnThree(PAYOFF), score_range=(0.0, 1.0))
    envs.reset(seed=0)
    actions = np.tile([0, 1, 2, 3], M)
    _, rewards, _, _, info = envs.step(actions)
    failed = actions == 3
    assert (info["exec_status"][failed] == "invalid_output").all()
    assert (info["real_score"][failed] == 0.0).all() and info["program_failed"][failed].all()
    batch = batch_diagnostics(info)
    assert batch["n_failed"] == 0 and batch["n_program_failures"] == failed.sum()
    assert (info["advantage"][failed] < 0).all()  # pushed down, not left out
    assert (rewards[failed] == 0.0).all()
    envs.close()


def test_without_a_failure_score_program_failures_stay_missing_with_a_warning() -> None:
    envs = all_anchor_envs(lambda: GarbageOnThree(PAYOFF))
    envs.reset(seed=0)
    with pytest.warns(UserWarning, match="failure_score"):
        _, _, _, _, info = envs.step(np.tile([0, 1, 2, 3], M))
    assert np.isnan(info["real_score"][3]) and info["advantage"][3] == 0.0
    envs.close()


def test_an_infrastructure_failure_is_missing_not_scored() -> None:
    envs = all_anchor_envs(lambda: BanditEnv(PAYOFF, fail_action=3), score_range=(0.0, 1.0))
    envs.reset(seed=0)
    _, _, _, _, info = envs.step(np.tile([0, 1, 2, 3], M))
    assert (info["exec_status"][3::4] == "error").all()
    assert np.isnan(info["real_score"][3::4]).all() and (info["advantage"][3::4] == 0).all()
    assert not info["program_failed"].any()
    envs.close()


def test_consecutive_infrastructure_failures_raise() -> None:
    envs = all_anchor_envs(
        lambda: BanditEnv(PAYOFF, fail_action=3), max_infrastructure_failures=M * G
    )
    envs.reset(seed=0)
    envs.step(np.tile([3, 3, 3, 0], M))  # an ok result in every group breaks the streak
    envs.reset()
    with pytest.raises(InfrastructureFailureError, match="in a row failed in the infrastructure"):
        envs.step(np.full(M * G, 3))
    envs.close()


@pytest.mark.torch
def test_training_stops_when_no_anchor_returns_a_real_result() -> None:
    from wmrl_env import grpo

    envs = all_anchor_envs(lambda: BanditEnv(PAYOFF, fail_action=3), max_infrastructure_failures=0)

    policy = grpo.make_policy(envs.single_observation_space, envs.single_action_space, 0, seed=0)
    threes = lambda obs: np.full(len(obs), 3)  # noqa: E731 - every action breaks the env
    policy.act = lambda obs: (threes(obs), policy.log_prob(obs, threes(obs)).detach())
    config = grpo.GRPOConfig(iterations=10, max_rounds_without_real=3)
    with pytest.raises(RuntimeError, match="no anchor has returned a real result for 3 rounds"):
        grpo.train(envs, policy, config)
    envs.close()


def test_the_gate_clusters_groups_by_their_task() -> None:
    """The bandit's context is its task: across rounds, the gate pools at most 2 clusters."""
    envs = all_anchor_envs(lambda: BanditEnv(PAYOFF, noise=0.1), score_range=(0.0, 1.0))
    envs.reset(seed=0)
    for _ in range(3):
        envs.step(np.tile([0, 1, 2, 3], M))
        envs.reset()
    assert 1 <= envs.fusion.gate.num_clusters <= PAYOFF.shape[0]
    envs.close()
