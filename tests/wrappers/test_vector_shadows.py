"""The anchors' shadows of multi-step rounds (``WorldModelVectorEnv(shadow=...)``): open
(the real actions replayed in the model), closed (the policy plays the model from the start,
the anchor's noise kept) and continued (half the real episode, then imagined), checked against
scores computed by hand on a point mass."""

from __future__ import annotations

import numpy as np
import pytest
from testing_env import (
    BanditEnv,
    BanditWorldModel,
    PointMassEnv,
    PointMassModel,
    Sluggish,
    closed_shadow_gaps,
)

from wmrl_env import RewardFusion, WorldModelVectorEnv
from wmrl_env.wrappers.shadows import AnchorShadow

# a group's members play the same actions here: the debiasing's fit has one score to go on
pytestmark = pytest.mark.filterwarnings("ignore:calibration falls back to identity")
M, G, T = 2, 3, 6
PUSH = 0.4  # the learner pushes every member away from 0: no episode ends before T


def pull_in(observations):
    """The imagination policy: a pull towards 0 (the learner's action minus it is its noise)."""
    return (-0.1 * observations).astype(np.float32)


def make_envs(model, shadow, **kwargs):
    return WorldModelVectorEnv(
        PointMassEnv,
        model,
        num_groups=M,
        group_size=G,
        fusion=RewardFusion(method="wmrl", anchor_fraction=0.5, seed=0),
        executor="inline",
        max_episode_steps=T,
        shadow=shadow,
        **kwargs,
    )


def play(envs, learner):
    """One round; returns the start observations, the anchors and the last info."""
    obs, reset_info = envs.reset(seed=3)
    start = obs.copy()
    while True:
        obs, _, terminated, truncated, info = envs.step(learner(obs))
        if (terminated | truncated).all():
            return start[:, 0], reset_info["is_anchor"], info


def push(observations):
    return (PUSH * np.sign(observations)).astype(np.float32)


def by_hand(shadow: str, x0: float) -> float:
    """An anchor's shadow score under :class:`Sluggish` (``x' = x + a / 2``, reward ``-|x'|``)
    when the real episode is ``x_t = x0 + 0.4 t sign(x0)``, played by :func:`push`."""
    s = np.sign(x0)
    real = [x0 + PUSH * s * t for t in range(T)]  # the states the real actions were chosen on
    if shadow == "open":
        return -sum(abs(x0 + 0.5 * PUSH * s * t) for t in range(1, T + 1))
    forced = T // 2 if shadow == "continued" else 0
    score = -sum(abs(real[t] + 0.5 * PUSH * s) for t in range(forced))
    x = real[forced]
    for t in range(forced, T):
        noise = PUSH * s - (-0.1 * real[t])
        x = x + 0.5 * (-0.1 * x + noise)
        score -= abs(x)
    return score


@pytest.mark.parametrize("shadow", ["open", "closed", "continued"])
def test_each_shadow_scores_the_anchors_as_computed_by_hand(shadow):
    kwargs = {} if shadow == "open" else {"imagination_policy": pull_in}
    envs = make_envs(Sluggish(), shadow, **kwargs)
    starts, anchors, info = play(envs, push)
    expected = [by_hand(shadow, x0) for x0 in starts[anchors]]
    np.testing.assert_allclose(info["wm_score"][anchors], expected, rtol=1e-5)
    envs.close()


def test_the_three_shadows_differ_on_a_wrong_model():
    x0 = 1.7
    scores = [by_hand(shadow, x0) for shadow in ("open", "closed", "continued")]
    assert len({round(s, 6) for s in scores}) == 3


@pytest.mark.parametrize("shadow", ["open", "closed", "continued"])
def test_with_an_exact_model_every_shadow_is_the_real_episode(shadow):
    """The closed shadow keeps the anchor's noise: an exact model replays its real episode,
    termination included, although the policy acts on the imagined states."""
    rng = np.random.default_rng(0)

    def noisy(observations):  # clipped to the action space, as a learner plays them
        actions = pull_in(observations) + rng.normal(0, 0.5, observations.shape)
        return np.clip(actions, -1, 1).astype(np.float32)

    kwargs = {} if shadow == "open" else {"imagination_policy": pull_in}
    envs = make_envs(PointMassModel(), shadow, **kwargs)
    for _ in range(3):
        _, anchors, info = play(envs, noisy)
        np.testing.assert_allclose(
            info["wm_score"][anchors], info["real_score"][anchors], rtol=1e-4, atol=1e-5
        )
    envs.close()


def test_world_model_members_are_imagined_the_same_whatever_the_shadow():
    infos = {}
    for shadow in ("open", "closed"):
        kwargs = {} if shadow == "open" else {"imagination_policy": pull_in}
        envs = make_envs(Sluggish(), shadow, **kwargs)
        _, anchors, infos[shadow] = play(envs, push)
        envs.close()
    np.testing.assert_array_equal(
        infos["open"]["wm_score"][~anchors], infos["closed"]["wm_score"][~anchors]
    )


def test_bad_shadows_are_refused():
    with pytest.raises(ValueError, match="shadow must be one of"):
        make_envs(PointMassModel(), "teacher")
    with pytest.raises(ValueError, match="needs imagination_policy"):
        make_envs(PointMassModel(), "closed")
    with pytest.raises(ValueError, match="multi-step"):
        payoff = np.eye(2)
        WorldModelVectorEnv(
            lambda: BanditEnv(payoff), BanditWorldModel(payoff), 2, 2, shadow="closed"
        )
    with pytest.raises(ValueError, match="mode must be one of"):
        AnchorShadow("open", pull_in, keep_noise=True)
    shadow = AnchorShadow("closed", pull_in, keep_noise=True)
    with pytest.raises(ValueError, match="as many real states as actions"):
        shadow.scores(PointMassModel(), [np.zeros((2, 1))], [np.zeros((1, 1))], max_steps=3)


def test_ppi_on_a_multi_step_task_is_refused_with_the_open_shadow():
    """The open shadow's score replays the real actions: not a world-model member's kind of
    score, so PPI's correction would be biased; the closed shadow is accepted."""
    ppi = RewardFusion(method="ppi", anchor_fraction=0.5, seed=0)
    with pytest.raises(ValueError, match="'ppi' on a multi-step task needs shadow='closed'"):
        WorldModelVectorEnv(PointMassEnv, PointMassModel(), M, G, ppi, max_episode_steps=T)
    envs = WorldModelVectorEnv(
        PointMassEnv,
        PointMassModel(),
        M,
        G,
        ppi,
        executor="inline",
        max_episode_steps=T,
        shadow="closed",
        imagination_policy=pull_in,
    )
    envs.close()


@pytest.mark.filterwarnings("ignore::wmrl_env.fusion.RewardHackingWarning")
def test_the_closed_shadow_scores_like_a_world_model_member_where_real_episodes_end_first():
    """PPI needs an anchor's closed shadow to be distributed as a world-model member's score.
    Real episodes here mostly end before the limit (|x| < 0.1) while the sluggish model's go
    on; a shadow played by the policy's mean after the real end lacks the noise a member's
    actions carry (E[shadow - member] was +0.18 +- 0.03 over 800 rounds); with the noise of
    the learner's actions on the ended episodes it is 0 within the Monte-Carlo error."""
    gaps, early = closed_shadow_gaps(600)
    assert early > 0.5  # the case in question: real episodes end first
    se = gaps.std(ddof=1) / np.sqrt(gaps.size)
    assert abs(gaps.mean()) < 4 * se, f"E[shadow - member] = {gaps.mean():+.3f} +- {se:.3f}"


def test_the_shadow_takes_its_noise_past_the_real_episode_from_spare_then_pool():
    """One real step; the imagined episode goes on for two more: step 1 takes the spare
    action's noise, step 2 a draw from the pool."""
    shadow = AnchorShadow("closed", lambda obs: np.zeros_like(obs), keep_noise=True)
    walk = PointMassModel()
    states, actions = [np.array([[5.0]])], [np.array([[0.5]])]
    spare = [(np.array([[9.0]]), np.array([[0.25]]))]
    pool = (np.array([[9.0]]), np.array([[0.125]]))
    (score,), _, _ = shadow.scores(walk, states, actions, 3, spare=spare, pool=pool)
    assert score == pytest.approx(-(5.5 + 5.75 + 5.875))
    (alone,), _, _ = shadow.scores(walk, states, actions, 3)
    assert alone == pytest.approx(-(5.5 + 5.5 + 5.5))  # the policy's mean (0) alone


class WalkWithStd:
    """Moves by the action; each step pays 1 with the given std (``None``: no std)."""

    def __init__(self, std):
        self.std = std

    def predict_step(self, observations, actions):
        n = len(observations)
        std = None if self.std is None else np.full(n, self.std)
        return observations + actions, np.ones(n), np.zeros(n, bool), std


@pytest.mark.parametrize("mode", ["closed", "continued"])
def test_the_shadows_std_sums_the_step_variances(mode):
    """Four imagined steps of std 0.5 (the continued shadow's first two from the real
    states): the score's std is sqrt(4 x 0.25) = 1; a model without a std, or with a NaN
    one, gives none."""
    shadow = AnchorShadow(mode, lambda obs: np.zeros_like(obs), keep_noise=False)
    states, actions = [np.zeros((4, 1))], [np.zeros((4, 1))]
    scores = shadow.scores(WalkWithStd(0.5), states, actions, max_steps=4)
    assert scores.score.tolist() == [4.0]
    assert scores.std.tolist() == pytest.approx([1.0])
    assert shadow.scores(WalkWithStd(None), states, actions, max_steps=4).std is None
    assert shadow.scores(WalkWithStd(np.nan), states, actions, max_steps=4).std is None
