"""Uncertainty-driven anchors: priorities from the world model's std, PPI still unbiased."""

from __future__ import annotations

import numpy as np
from anchor_batches import batch_mean_errors, biased_batch, opened_ppi_fusion

from wmrl_env.fusion import RewardFusion, inclusion_probabilities, uncertainty_priorities

M, G, Z = 32, 8, 4.0


def test_priorities_follow_the_std_and_set_the_inclusion_probabilities() -> None:
    rng = np.random.default_rng(0)
    ids, _, _, std = biased_batch(rng)
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
    fusion = opened_ppi_fusion(rng, lambda ids, wm, std: uncertainty_priorities(ids, std))
    batch = ids, real, wm, std = biased_batch(rng)
    errors = batch_mean_errors(fusion, batch, uncertainty_priorities(ids, std))
    se = errors.std(ddof=1) / np.sqrt(errors.size)
    assert abs(errors.mean()) <= Z * se, (errors.mean(), se)
    assert abs(wm.mean() - real.mean()) > 5 * Z * se  # the bias PPI removes
