"""World-model screening inside anchor groups: the member draw's exact probabilities, the
fusion's partly executed groups, and which estimator stays unbiased under which selection."""

from __future__ import annotations

import numpy as np
import pytest
from anchor_batches import biased_batch, opened_ppi_fusion

from wmrl_env.fusion import RewardFusion, rectified_rewards, screen_members, ucb_priorities

# Two-sided normal tail beyond 4.5 s.e. is 6.8e-6: over at most 64 checked quantities a
# false alarm has probability < 4.4e-4 (Bonferroni).
Z_MANY = 4.5
Z_ONE = 4.0  # one statistic: a false alarm has probability 6e-5


def test_top_screening_executes_the_highest_upper_bounds() -> None:
    ids = np.repeat([0, 1, 2], 4)
    upper = np.array([0.1, 0.9, 0.5, 0.7, 0.3, 0.2, 0.1, 0.4, 0.5, np.nan, 0.1, 0.2])
    executed, pi = screen_members(ids, upper, 2, np.random.default_rng(0), how="top")
    assert executed.tolist() == [False, True, False, True, True, False, False, True] + [True] * 4
    assert pi.tolist() == executed.astype(float).tolist()  # deterministic: 1 or 0
    small, pi_small = screen_members(np.array([0, 0]), np.ones(2), 2, np.random.default_rng(0))
    assert small.all() and pi_small.tolist() == [1.0, 1.0]  # a group of at most k: all
    ties = np.zeros(4)
    for seed in range(400):  # equal upper bounds: ties broken at random, not by position
        ties += screen_members(np.zeros(4, int), np.zeros(4), 1, np.random.default_rng(seed))[0]
    assert ties.min() > 50


def test_pps_screening_realises_its_member_probabilities() -> None:
    """pi_{i|g} sums to k in every group, is > 0 for every member, grows with the upper
    bound; draw frequencies over N draws match it within Z_MANY binomial s.e. per member."""
    rng = np.random.default_rng(0)
    ids = np.repeat(np.arange(4), 6)
    upper = rng.uniform(size=24)
    _, pi = screen_members(ids, upper, 2, rng, how="pps", uniform_mix=0.3)
    for g in range(4):
        members = ids == g
        assert pi[members].sum() == pytest.approx(2.0)
        order = np.argsort(upper[members])
        assert (np.diff(pi[members][order]) >= -1e-12).all()
    assert (pi > 0).all() and (pi <= 1).all()
    n = 10_000
    counts = np.zeros(24)
    for _ in range(n):
        executed, again = screen_members(ids, upper, 2, rng, how="pps", uniform_mix=0.3)
        assert (np.bincount(ids, executed) == 2).all()
        np.testing.assert_array_equal(again, pi)
        counts += executed
    se = np.sqrt(pi * (1 - pi) / n)
    assert (np.abs(counts / n - pi) <= Z_MANY * np.maximum(se, 1e-12)).all()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"how": "best"}, "screening must be one of"),
        ({"keep": 0}, "int >= 1"),
        ({"keep": 1.5}, "int >= 1"),
        ({"keep": True}, "int >= 1"),
        ({"upper": np.ones(3)}, "upper has shape"),
    ],
)
def test_bad_screening_arguments_get_a_clear_error(kwargs, message) -> None:
    args = {"upper": np.ones(4), "keep": 1, "how": "pps", **kwargs}
    with pytest.raises(ValueError, match=message):
        screen_members(np.array([0, 0, 1, 1]), args["upper"], args["keep"],
                       np.random.default_rng(0), args["how"])  # fmt: skip


def test_the_fusion_checks_partly_executed_groups() -> None:
    ids = np.repeat([0, 1], 4)
    wm = np.linspace(0.1, 0.8, 8)
    real = np.array([0.2, 0.3, np.nan, np.nan] + [np.nan] * 4)
    screened = np.array([False, False, True, True] + [False] * 4)
    fusion = RewardFusion(method="wmrl", seed=0)
    out = fusion.step(ids, wm, real, screened=screened,
                      inclusion_probabilities=np.full(8, 0.25))  # fmt: skip
    assert out.is_anchor.tolist() == [True, True] + [False] * 6
    with pytest.raises(ValueError, match="screened=True"):
        fusion.step(ids, wm, real)  # a partial group without its screening
    with pytest.raises(ValueError, match="screened out but has a real score"):
        fusion.step(ids, wm, np.where(screened, 0.5, real), screened=screened)
    ppi = RewardFusion(method="ppi", seed=0)
    top_pi = np.array([0.5, 0.5, 0.0, 0.0] + [0.5] * 4)  # 'top': screened members had pi 0
    with pytest.raises(ValueError, match="ppi needs every member"):
        ppi.step(ids, wm, real, screened=screened, inclusion_probabilities=top_pi)
    with pytest.raises(RuntimeError, match="select_anchors first"):
        ppi.screen_anchors(np.ones(8, bool), np.ones(8))
    anchors = ppi.select_anchors(ids)
    group = anchors.reshape(2, 4)[:, 0]
    with pytest.raises(ValueError, match="bool mask"):
        ppi.screen_anchors(np.ones(7, bool), np.ones(7))
    with pytest.raises(ValueError, match="at least one member"):
        ppi.screen_anchors(np.zeros(8, bool), np.ones(8))
    with pytest.raises(ValueError, match="member probability 0"):
        ppi.screen_anchors(anchors, np.zeros(8))
    executed = ppi.screen_anchors(anchors & (np.arange(8) % 4 < 2), np.full(8, 0.5))
    assert executed.sum() == 2 and np.repeat(group, 4)[executed].all()
    with pytest.raises(ValueError, match="not both"):
        ppi.step(ids, wm, np.where(executed, 0.5, np.nan), screened=~executed)
    out = ppi.step(ids, wm, np.where(executed, 0.5, np.nan))
    assert out.inclusion[executed] == pytest.approx([0.25, 0.25])  # pi_g * pi_{i|g}


def test_a_closed_gate_does_not_favour_the_executed_members() -> None:
    """wmrl with lam = 0 (a fresh fusion): a screened group whose executed members score
    its calibrated mean gets zero advantages. Scoring the others by lam * f = 0 instead
    would push the executed members up whatever they scored."""
    ids = np.repeat([0, 1], 4)
    wm = np.array([0.2, 0.8, 0.5, 0.5, 0.3, 0.4, 0.5, 0.6])
    real = np.array([np.nan, np.nan, 0.5, 0.5] + [np.nan] * 4)
    screened = np.array([True, True, False, False] + [False] * 4)
    fusion = RewardFusion(method="wmrl", seed=0)
    assert fusion.wm_weight == 0.0
    out = fusion.step(ids, wm, real, screened=screened, inclusion_probabilities=np.full(8, 0.5))
    assert out.calibrated[:4] == pytest.approx(wm[:4])  # identity map before any pair
    assert out.advantages[:4] == pytest.approx(np.zeros(4), abs=1e-12)


def test_pps_screening_keeps_ppi_unbiased_and_top_screening_does_not() -> None:
    """UCB group draw, then k = 2 of 8 members by PPS within each anchor group, recorded by
    screen_anchors: over 3,000 draws from one history, the PPI reward's batch mean matches
    the real mean within Z_ONE Monte-Carlo s.e., and each group's mean within Z_MANY s.e.
    (32 groups). The same draw with the k highest upper bounds executed (pi_{i|g} = 1 for
    them, 0 for the rest) leaves the estimate biased by more than 5 Z_ONE s.e."""
    rng = np.random.default_rng(3)
    fusion = opened_ppi_fusion(rng, ucb_priorities)
    state = fusion.state_dict()
    ids, real, wm, std = biased_batch(rng)
    priorities, upper = ucb_priorities(ids, wm, std), wm + std
    calibrated = fusion.calibrator.map(wm)  # what exact PPI rectifies with (the prior map)
    lam = fusion.wm_weight
    pps_means, top_means = [], []
    for draw in range(3000):
        fusion.load_state_dict(state)
        fusion.reseed(draw)
        anchors = fusion.select_anchors(ids, priorities)
        group_pi = fusion.inclusion_probabilities.copy()  # pi_g, before screening
        member_rng = np.random.default_rng([draw, 1])
        executed, member_pi = screen_members(ids, upper, 2, member_rng, how="pps")
        executed = fusion.screen_anchors(executed, member_pi)
        out = fusion.step(ids, wm, np.where(executed, real, np.nan))
        pps_means.append(np.bincount(ids, out.rewards) / 8)
        top, _ = screen_members(ids, upper, 2, member_rng, how="top")
        x = rectified_rewards(calibrated, calibrated, real, anchors & top, group_pi, lam)
        top_means.append(np.bincount(ids, x) / 8)
    group_real = np.bincount(ids, real) / 8
    for means, unbiased in ((np.array(pps_means), True), (np.array(top_means), False)):
        batch_errors = means.mean(axis=1) - real.mean()
        se = batch_errors.std(ddof=1) / np.sqrt(batch_errors.size)
        if unbiased:
            assert abs(batch_errors.mean()) <= Z_ONE * se, (batch_errors.mean(), se)
            group_se = means.std(axis=0, ddof=1) / np.sqrt(means.shape[0])
            assert (np.abs(means.mean(axis=0) - group_real) <= Z_MANY * group_se).all()
        else:
            assert abs(batch_errors.mean()) > 5 * Z_ONE * se, (batch_errors.mean(), se)
