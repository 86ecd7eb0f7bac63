"""UCB anchors: priorities from each group's world-model upper bound, drawn with exact
inclusion probabilities, PPI still unbiased."""

from __future__ import annotations

import numpy as np
import pytest
from anchor_batches import batch_mean_errors, biased_batch, opened_ppi_fusion

from wmrl_env.fusion import RewardFusion, inclusion_probabilities, ucb_priorities

M, G = 16, 4
# Two-sided normal tail beyond 4.5 s.e. is 6.8e-6; over the M groups of one check a false
# alarm has probability < 1.1e-4 (Bonferroni).
Z_FREQUENCY = 4.5
Z_MEAN = 4.0  # one statistic: a false alarm has probability 6e-5


def test_a_group_priority_is_its_upper_bound_above_its_reference() -> None:
    ids = np.repeat(np.arange(3), 2)
    scores = np.array([0.2, 0.6, 0.9, np.nan, 0.1, 0.3])
    std = np.array([0.1, 0.0, 0.0, 0.5, np.nan, 0.0])  # NaN std: the batch's largest (0.5)
    u = np.array([0.6, 0.9, 1.1])  # max(s + 2 std) per group; the NaN score is left out
    priorities = ucb_priorities(ids, scores, std, kappa=2.0)
    assert priorities == pytest.approx(np.repeat(u - u.min(), 2))
    reference = np.repeat([0.5, np.nan, 1.0], 2)  # the middle group has none: batch minimum
    with_reference = ucb_priorities(ids, scores, std, kappa=2.0, reference=reference)
    assert with_reference == pytest.approx(np.repeat([0.1, 0.3, 0.1], 2))
    assert ucb_priorities(ids, scores, None, kappa=5.0) == pytest.approx(
        np.repeat([0.3, 0.6, 0.0], 2)  # no std: the mean alone
    )
    assert ucb_priorities(ids, np.full(6, np.nan)).tolist() == [0.0] * 6


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kappa": -1.0}, "kappa"),
        ({"kappa": float("nan")}, "kappa"),
        ({"wm_std": -np.ones(4)}, "non-negative"),
        ({"wm_std": np.ones(3)}, "wm_std has shape"),
        ({"reference": np.ones(5)}, "reference has shape"),
    ],
)
def test_bad_input_gets_a_clear_error(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        ucb_priorities(np.array([0, 0, 1, 1]), np.ones(4), **kwargs)
    with pytest.raises(ValueError, match="wm_scores has shape"):
        ucb_priorities(np.array([0, 0, 1, 1]), np.ones(3))


def test_ucb_inclusion_probabilities_sum_to_m_and_are_realised_exactly() -> None:
    """The fusion's draw with UCB priorities: pi sums to m, grows with the upper bound, and
    the draw frequencies over N draws match pi within Z_FREQUENCY binomial s.e. per group."""
    rng = np.random.default_rng(0)
    ids, _, wm, std = biased_batch(rng, M, G)
    priorities = ucb_priorities(ids, wm, std, kappa=1.0)
    fusion = RewardFusion(method="ppi", anchor_fraction=0.25, seed=0)
    pi = inclusion_probabilities(priorities[::G], 4, fusion.uniform_mix)
    assert pi.sum() == pytest.approx(4.0) and (pi > 0).all() and (pi <= 1).all()
    order = np.argsort(priorities[::G])
    assert (np.diff(pi[order]) >= -1e-12).all()  # higher upper bound, likelier anchor
    n = 20_000
    counts = np.zeros(M)
    for _ in range(n):
        drawn = fusion.select_anchors(ids, priorities)[::G]
        assert drawn.sum() == 4
        np.testing.assert_allclose(fusion.inclusion_probabilities[::G][drawn], pi[drawn])
        counts += drawn
    se = np.sqrt(pi * (1 - pi) / n)
    assert (np.abs(counts / n - pi) <= Z_FREQUENCY * np.maximum(se, 1e-12)).all()


def test_ppi_stays_unbiased_under_ucb_anchors() -> None:
    """Over 3,000 draws of UCB anchors from one history, the batch-mean PPI reward matches
    the batch-mean real reward within Z_MEAN Monte-Carlo s.e.; the raw world model's does
    not."""
    rng = np.random.default_rng(1)
    fusion = opened_ppi_fusion(rng, ucb_priorities)
    batch = ids, real, wm, std = biased_batch(rng)
    errors = batch_mean_errors(fusion, batch, ucb_priorities(ids, wm, std))
    se = errors.std(ddof=1) / np.sqrt(errors.size)
    assert abs(errors.mean()) <= Z_MEAN * se, (errors.mean(), se)
    assert abs(wm.mean() - real.mean()) > 5 * Z_MEAN * se  # the bias PPI removes
