"""Uncertainty-driven anchors: priorities from the world model's std, PPI still unbiased."""

from __future__ import annotations

import numpy as np

from wmrl_env.fusion import RewardFusion, inclusion_probabilities, uncertainty_priorities

M, G, Z = 32, 8, 4.0


def batch(rng):
    """True rewards; a world model whose error std varies by group (and says so), and which
    over-scores a fifth of the trajectories regardless of their reward (non-monotone bias)."""
    ids = np.repeat(np.arange(M), G)
    real = np.clip(rng.normal(0.5, 0.2, M)[ids] + rng.normal(0, 0.15, M * G), 0, 1)
    std = np.repeat(rng.choice([0.02, 0.3], M), G)
    wm = real + rng.normal(0, 1, M * G) * std + 0.3 * (rng.uniform(size=M * G) < 0.2)
    return ids, real, wm, std


def test_priorities_follow_the_std_and_set_the_inclusion_probabilities() -> None:
    rng = np.random.default_rng(0)
    ids, _, _, std = batch(rng)
    priorities = uncertainty_priorities(ids, std)
    fusion = RewardFusion(method="ppi", anchor_fraction=0.125, seed=0)
    fusion.select_anchors(ids, priorities)
    expected = inclusion_probabilities(priorities[::G], 4, fusion.uniform_mix)
    drawn = fusion.inclusion_probabilities[::G] > 0
    assert drawn.sum() == 4
    np.testing.assert_allclose(fusion.inclusion_probabilities[::G][drawn], expected[drawn])
    assert expected[std[::G] > 0.1].min() > expected[std[::G] < 0.1].max()


def test_ppi_stays_unbiased_under_uncertainty_driven_anchors() -> None:
    """Over 3,000 draws of the anchors from one history, the batch-mean PPI reward matches
    the batch-mean real reward within Z Monte-Carlo s.e.; the raw world model's does not."""
    rng = np.random.default_rng(1)
    fusion = RewardFusion(method="ppi", anchor_fraction=0.125, seed=0)
    for _ in range(12):  # a history in which the gate opens
        ids, real, wm, std = batch(rng)
        anchors = fusion.select_anchors(ids, uncertainty_priorities(ids, std))
        fusion.step(ids, wm, np.where(anchors, real, np.nan))
    assert fusion.wm_weight > 0
    state = fusion.state_dict()
    ids, real, wm, std = batch(rng)
    priorities = uncertainty_priorities(ids, std)
    errors = []
    for draw in range(3000):
        fusion.load_state_dict(state)
        fusion.reseed(draw)
        anchors = fusion.select_anchors(ids, priorities)
        out = fusion.step(ids, wm, np.where(anchors, real, np.nan))
        errors.append(out.rewards.mean() - real.mean())
    errors = np.asarray(errors)
    se = errors.std(ddof=1) / np.sqrt(errors.size)
    assert abs(errors.mean()) <= Z * se, (errors.mean(), se)
    assert abs(wm.mean() - real.mean()) > 5 * Z * se  # the bias PPI removes
