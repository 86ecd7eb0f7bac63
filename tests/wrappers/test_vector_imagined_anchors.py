"""Uncertainty-driven anchors of multi-step rounds: priorities from an imagined rollout of the
current policy from each group's start, drawn at ``reset`` with exact inclusion probabilities
that reach the real :class:`~wmrl_env.fusion.RewardFusion`."""

from __future__ import annotations

import math

import numpy as np
import pytest
from testing_env import CallLog, PointMassEnv, PointMassModel

from wmrl_env import RewardFusion, WorldModelVectorEnv
from wmrl_env.fusion import inclusion_probabilities
from wmrl_env.world_models.base import StepPrediction
from wmrl_env.wrappers.imagined_priorities import imagined_priorities

M, G, T = 4, 3, 6
FRACTION, ANCHORS = 0.5, 2  # num_anchor_groups(4, 0.5, 1) == 2


class UnsureFarAway(PointMassModel):
    """The point mass's exact dynamics, unsure far from 0 (std = 0.01 |x|^3)."""

    def predict_step(self, observations, actions):
        step = super().predict_step(observations, actions)
        std = 0.01 * np.abs(step.next_observations[:, 0]).astype(np.float64) ** 3
        return StepPrediction(step.next_observations, step.rewards, step.terminations, std=std)


def push_away(observations):
    return (0.4 * np.sign(observations)).astype(np.float32)


def make_envs(method="wmrl", log=None, model=None, **kwargs):
    return WorldModelVectorEnv(
        lambda: PointMassEnv(log=log),
        model or UnsureFarAway(),
        num_groups=M,
        group_size=G,
        fusion=RewardFusion(method=method, anchor_fraction=FRACTION, seed=0),
        executor="inline",
        max_episode_steps=T,
        **kwargs,
    )


def expected_pi(envs, observations):
    """The inclusion probabilities the draw should use, computed independently."""
    starts = observations.reshape(M, G, -1)[:, 0]
    priorities = imagined_priorities(UnsureFarAway(), push_away, starts, T)
    return inclusion_probabilities(priorities, ANCHORS, envs.fusion.uniform_mix)


def test_priorities_follow_the_imagined_uncertainty():
    starts = np.array([[0.05], [1.0], [-2.5]], np.float32)
    priorities = imagined_priorities(UnsureFarAway(), push_away, starts, T)
    # the first start is at the goal: the model predicts termination after one step
    assert priorities[0] < priorities[1] < priorities[2]
    x = np.abs(starts[2, 0]) + 0.4 * np.arange(1, T + 1)
    expected = math.sqrt(2 / math.pi) * math.sqrt(float(np.sum((0.01 * x**3) ** 2)))
    assert priorities[2] == pytest.approx(expected, rel=1e-5)


def test_pi_sums_to_the_anchors_and_the_draw_realises_it():
    """Over many resets, how often the most uncertain group is drawn matches its pi.

    Each reset's indicator minus its pi has mean 0 and variance pi (1 - pi); the sum over
    N independent resets has SD sqrt(sum pi (1 - pi)) (7.9 here): 4 SD is a false-alarm
    rate of 6e-5. A uniform draw would give the top group pi = 0.5; the priorities lift it
    to 0.69 on average, so the same sum under uniform draws would be off by about 57 (7 SD).
    """
    envs = make_envs(anchor_priority="uncertainty", imagination_policy=push_away)
    hits, pis = [], []
    for seed in range(300):
        obs, info = envs.reset(seed=seed)
        pi = expected_pi(envs, obs)
        assert pi.sum() == pytest.approx(ANCHORS)
        chosen = info["is_anchor"].reshape(M, G)[:, 0]
        assert chosen.sum() == ANCHORS
        recorded = envs.fusion.inclusion_probabilities.reshape(M, G)[:, 0]
        np.testing.assert_allclose(recorded[chosen], pi[chosen], rtol=1e-12)
        top = int(np.argmax(pi))
        hits.append(float(chosen[top]))
        pis.append(pi[top])
    hits, pis = np.array(hits), np.array(pis)
    assert pis.mean() > 0.65  # the priorities matter
    assert abs((hits - pis).sum()) < 4 * math.sqrt(float((pis * (1 - pis)).sum()))
    envs.close()


@pytest.mark.parametrize("method", ["wmrl", "ppi"])
def test_the_drawn_groups_are_executed_and_pi_reaches_the_fusion(method):
    log = CallLog()
    shadow = "closed" if method == "ppi" else "open"  # ppi is refused with the open shadow
    envs = make_envs(
        method, log, anchor_priority="uncertainty", imagination_policy=push_away, shadow=shadow
    )
    obs, reset_info = envs.reset(seed=3)
    pi = expected_pi(envs, obs)
    anchors = reset_info["is_anchor"]
    while True:
        obs, _, terminated, truncated, info = envs.step(push_away(obs))
        if (terminated | truncated).all():
            break
    assert log.count("step") == anchors.sum() * T  # the anchors, and nothing else, ran
    assert np.isfinite(info["real_score"][anchors]).all()
    assert np.isnan(info["real_score"][~anchors]).all()
    per_env = np.repeat(pi, G)
    np.testing.assert_allclose(info["inclusion_probability"][anchors], per_env[anchors])
    assert not np.allclose(per_env[anchors], ANCHORS / M)  # not the uniform pi
    envs.close()


def test_it_needs_a_policy_and_a_std():
    with pytest.raises(ValueError, match="imagination_policy"):
        make_envs(anchor_priority="uncertainty")
    with pytest.raises(ValueError, match="imagination_policy"):
        make_envs(imagination_policy=push_away)
    envs = make_envs(
        model=PointMassModel(), anchor_priority="uncertainty", imagination_policy=push_away
    )
    with pytest.raises(ValueError, match="std"):
        envs.reset(seed=0)
    envs.close()
