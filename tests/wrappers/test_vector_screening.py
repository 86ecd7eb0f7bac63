"""``WorldModelVectorEnv``: UCB anchors and world-model screening inside anchor groups."""

from __future__ import annotations

import numpy as np
import pytest
from testing_env import BanditEnv, BanditWorldModel, CallLog, PointMassEnv, PointMassModel

from wmrl_env import RewardFusion, WorldModelVectorEnv
from wmrl_env.fusion import screen_members, ucb_priorities
from wmrl_env.wrappers.vector import ANCHOR_STREAM, SCREEN_STREAM

PAYOFF = np.array([[0.0, 0.2, 1.0, 0.5], [0.9, 0.0, 0.1, 0.3], [0.4, 0.6, 0.0, 1.0]])
M, G = 8, 4


class UncertainBanditModel(BanditWorldModel):
    """Also returns a predictive std: large for context 0, small elsewhere."""

    def predict(self, contexts, actions):
        scores = super().predict(contexts, actions)
        return scores, np.where(np.asarray(contexts) == 0, 0.5, 0.05)


def make_envs(log=None, world_model=None, method="wmrl", **kwargs):
    return WorldModelVectorEnv(
        lambda: BanditEnv(PAYOFF, noise=0.0, log=log),
        world_model or UncertainBanditModel(PAYOFF, scale=0.5, bias=0.2),
        num_groups=M,
        group_size=G,
        fusion=RewardFusion(method=method, anchor_fraction=0.25, seed=0),
        executor="inline",
        **kwargs,
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"execute_per_group": 0}, "execute_per_group must be in"),
        ({"execute_per_group": G}, "execute_per_group must be in"),
        ({"execute_per_group": 1.5}, "execute_per_group must be an int"),
        ({"execute_per_group": True}, "execute_per_group must be an int"),
        ({"execute_per_group": 1}, "execute_per_group=1 cannot be used with method 'wmrl'"),
        ({"screening": "best"}, "screening must be one of"),
        ({"ucb_kappa": -1.0}, "ucb_kappa"),
        ({"ucb_kappa": float("inf")}, "ucb_kappa"),
        ({"anchor_priority": "loudest"}, "anchor_priority"),
    ],
)
def test_wrong_arguments_get_a_clear_error(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        make_envs(**kwargs)


def test_top_screening_is_refused_with_ppi_and_both_need_an_outcome_task() -> None:
    with pytest.raises(ValueError, match="screening='top' cannot be used with method 'ppi'"):
        make_envs(method="ppi", execute_per_group=1, screening="top")
    make_envs(method="ppi", execute_per_group=1, screening="pps").close()
    for kwargs in ({"anchor_priority": "ucb"}, {"execute_per_group": 1}):
        with pytest.raises(ValueError, match="outcome task"):
            WorldModelVectorEnv(lambda: PointMassEnv(), PointMassModel(), num_groups=2,
                                group_size=2, executor="inline", max_episode_steps=3,
                                **kwargs)  # fmt: skip


@pytest.mark.parametrize("screening", ["top", "pps"])
def test_screening_executes_k_members_of_each_anchor_group(screening) -> None:
    """Only k members of each anchor group run for real, the ones screen_members picks
    from the upper bounds; their inclusion probability is pi_g * pi_{i|g}; the rest are
    scored by the fusion (a NaN real score, not an anchor)."""
    log = CallLog()
    envs = make_envs(log, execute_per_group=2, screening=screening, ucb_kappa=0.5)
    twin = RewardFusion(method="wmrl", anchor_fraction=0.25, seed=0)
    obs, reset_info = envs.reset(seed=4)
    twin.reseed([4, ANCHOR_STREAM])
    groups = twin.select_anchors(reset_info["group_id"])
    np.testing.assert_array_equal(groups, reset_info["is_anchor"])
    actions = envs.action_space.sample()
    info = envs.step(actions)[-1]
    model = UncertainBanditModel(PAYOFF, scale=0.5, bias=0.2)
    scores, std = model.predict(obs, actions)
    upper = scores + 0.5 * std
    executed, member_pi = screen_members(
        info["group_id"], upper, 2, np.random.default_rng([4, SCREEN_STREAM]), screening
    )
    executed &= groups
    np.testing.assert_array_equal(info["is_anchor"], executed)
    assert log.count("step") == executed.sum() == 2 * (groups.sum() // G)
    assert np.isnan(info["real_score"][groups & ~executed]).all()
    group_pi = twin.inclusion_probabilities
    np.testing.assert_allclose(
        info["inclusion_probability"][executed], (group_pi * member_pi)[executed]
    )
    if screening == "top":  # the executed members have their group's two highest bounds
        anchored = groups.reshape(M, G)[:, 0]
        two_best = np.sort(upper.reshape(M, G), axis=1)[:, -2:]
        ran = np.sort(upper[executed].reshape(-1, 2), axis=1)
        np.testing.assert_allclose(ran, two_best[anchored])
    envs.close()


def test_ucb_anchors_are_drawn_from_the_upper_bound_above_the_best_so_far() -> None:
    """anchor_priority='ucb': drawn at step with ucb_priorities, whose reference is the
    best real score executed so far in each group's context (NaN before any)."""
    envs = make_envs(anchor_priority="ucb", ucb_kappa=2.0)
    twin = RewardFusion(method="wmrl", anchor_fraction=0.25, seed=0)
    model = UncertainBanditModel(PAYOFF, scale=0.5, bias=0.2)
    for round_seed in (4, 5):
        obs, info = envs.reset(seed=round_seed)
        assert not info["is_anchor"].any()  # drawn at step, once the world model has spoken
        reference = np.array(
            [envs.best_executed.get(int(c), (np.nan, None))[0] for c in obs], dtype=float
        )
        twin.reseed([round_seed, ANCHOR_STREAM])
        actions = envs.action_space.sample()
        _, rewards, _, _, info = envs.step(actions)
        scores, std = model.predict(obs, actions)
        priorities = ucb_priorities(info["group_id"], scores, std, 2.0, reference)
        np.testing.assert_array_equal(
            twin.select_anchors(info["group_id"], priorities), info["is_anchor"]
        )
        np.testing.assert_allclose(
            info["inclusion_probability"][info["is_anchor"]],
            twin.inclusion_probabilities[info["is_anchor"]],
        )
        out = twin.step(info["group_id"], info["wm_score"], info["real_score"])
        np.testing.assert_allclose(rewards, out.rewards)
    assert np.isfinite(reference).any()  # the second round had a best executed score
    envs.close()


def test_a_group_with_an_invalid_prediction_is_executed_whole() -> None:
    log = CallLog()
    model = UncertainBanditModel(PAYOFF, scale=0.5, bias=0.2, invalid_actions=(3,))
    envs = make_envs(log, world_model=model, execute_per_group=2, screening="pps")
    envs.reset(seed=0)
    actions = np.tile([0, 1, 2, 3], M)  # every group holds an invalid prediction
    _, _, _, _, info = envs.step(actions)
    assert info["is_anchor"].all() and log.count("step") == M * G
    assert np.isfinite(info["real_score"]).all()
    envs.close()


@pytest.mark.parametrize("screening", ["top", "pps"])
def test_screening_never_executes_a_known_outcome(screening) -> None:
    """Action 3 is known to fail without running (``known_failure``): screening picks its k
    members among the others, so an anchor group holding known members still runs k, not
    all of them, and no known member runs."""
    log = CallLog()
    envs = make_envs(
        log,
        execute_per_group=1,
        method="debias",
        screening=screening,
        known_failure=lambda action: int(action) == 3,
        failure_score=0.0,
    )
    envs.reset(seed=4)
    actions = np.tile([3, 3, 0, 1], M)  # half of every group is known to fail
    info = envs.step(actions)[-1]
    executed = [int(call[2]) for call in log.of("step")]
    assert 3 not in executed
    assert len(executed) == round(0.25 * M)  # k = 1 in each of the anchor groups
    assert info["known_failure"].sum() == 2 * M
    envs.close()


def test_priorities_ignore_known_outcomes() -> None:
    """Uncertainty-driven anchors: a group whose only uncertain members are known to fail
    has nothing to teach and is never drawn while others are."""
    log = CallLog()
    envs = make_envs(
        log,
        anchor_priority="uncertainty",
        known_failure=lambda action: int(action) == 3,
        failure_score=0.0,
    )
    envs.reset(seed=1)
    contexts = np.asarray(envs._round.setup.starts.observations)
    actions = np.where(np.repeat(contexts, G) == 0, 3, 1)  # context 0 (the uncertain one): known
    info = envs.step(actions)[-1]
    assert info["is_anchor"].any()
    assert not (info["is_anchor"] & (np.repeat(contexts, G) == 0)).any()
    envs.close()
