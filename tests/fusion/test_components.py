"""Anchor selection, advantages, kappa and the sorted window, each on its own."""

from __future__ import annotations

import numpy as np
import pytest

from wmrl_env.fusion.advantages import group_advantages
from wmrl_env.fusion.anchors import inclusion_probabilities, num_anchor_groups, select_anchor_groups
from wmrl_env.fusion.groups import GroupIndex
from wmrl_env.fusion.kappa import KappaEstimator, fusion_weights, within_group_variances
from wmrl_env.fusion.window import SortedPairWindow

Z = 4.0


def test_priority_selection_realises_its_inclusion_probabilities() -> None:
    rng = np.random.default_rng(0)
    priorities = np.array([0.0, 1.0, 2.0, 3.0, 10.0, 0.5, 0.2, 5.0])
    expected = inclusion_probabilities(priorities, 3)
    draws = 20_000
    counts = np.zeros(8)
    for _ in range(draws):
        chosen, pi = select_anchor_groups(8, 3, rng, priorities)
        assert chosen.sum() == 3
        counts += chosen
    se = np.sqrt(expected * (1 - expected) / draws)
    assert np.all(np.abs(counts / draws - expected) <= Z * se + 1e-12)
    np.testing.assert_allclose(pi, expected)


def test_inclusion_probabilities_are_capped_and_sum_to_the_anchor_count() -> None:
    pi = inclusion_probabilities(np.array([100.0, 1.0, 1.0, 1.0]), 2, uniform_mix=0.1)
    assert pi.max() == 1.0 and pi.sum() == pytest.approx(2.0)
    assert np.all(pi >= 0.1 * 2 / 4 - 1e-12)  # the uniform share bounds 1/pi


def test_uniform_selection_and_counts() -> None:
    chosen, pi = select_anchor_groups(10, 0, np.random.default_rng(0))
    assert not chosen.any() and np.all(pi == 0)
    assert num_anchor_groups(100, 0.1, 1) == 10 and num_anchor_groups(3, 0.1, 5) == 3
    with pytest.raises(ValueError):
        select_anchor_groups(3, 4, np.random.default_rng(0))
    with pytest.raises(ValueError, match="non-negative"):
        inclusion_probabilities(np.array([1.0, -1.0]), 1)


def test_group_advantage_scalings() -> None:
    groups = GroupIndex.from_ids(np.repeat([0, 1], 3))
    x = np.array([0.0, 1.0, 2.0, 0.0, 10.0, 20.0])
    none = group_advantages(x, groups, "none")
    np.testing.assert_allclose(none, [-1, 0, 1, -10, 0, 10])
    batch = group_advantages(x, groups, "batch")
    np.testing.assert_allclose(batch, none / np.sqrt(np.sum(none**2) / 5))
    group = group_advantages(x, groups, "group")
    np.testing.assert_allclose(group, [-1, 0, 1, -1, 0, 1])
    with pytest.raises(ValueError, match="scaling"):
        group_advantages(x, groups, "token")


def test_group_scaling_of_a_constant_group_is_zero_not_nan() -> None:
    groups = GroupIndex.from_ids([0, 0, 1, 1])
    out = group_advantages(np.array([1.0, 1.0, 0.0, 2.0]), groups, "group")
    np.testing.assert_allclose(out, [0, 0, -1 / np.sqrt(2), 1 / np.sqrt(2)])


def test_kappa_formula_clip_and_smoothing() -> None:
    groups = np.repeat([0, 1], 4)
    real = np.array([0.0, 1.0, 2.0, 3.0, 1.0, 2.0, 3.0, 4.0])
    residuals = real * 0.5
    sigma2_e, sigma2_r, dof = within_group_variances(residuals, real, groups)
    assert dof == 6 and sigma2_e == pytest.approx(0.25 * sigma2_r)
    estimator = KappaEstimator(kappa_max=3.0, smoothing=0.5)
    assert estimator.update(residuals, real, groups) == pytest.approx(1.25)
    assert estimator.update(residuals * 10, real, groups) == pytest.approx((1.25 + 3.0) / 2)
    assert estimator.raw == 3.0


def test_kappa_centring_removes_group_constant_bias() -> None:
    groups = np.repeat([0, 1], 4)
    real = np.array([0.0, 1.0, 2.0, 3.0, 1.0, 2.0, 3.0, 4.0])
    biased = np.where(groups == 0, 5.0, -3.0)  # residual = a constant per group
    estimator = KappaEstimator(smoothing=1.0)
    assert estimator.update(biased, real, groups) == 1.0


def test_uncentred_kappa_for_groups_of_one() -> None:
    estimator = KappaEstimator(smoothing=1.0, centre=False)
    real = np.array([0.0, 1.0, 2.0, 3.0])
    kappa = estimator.update(np.array([1.0, -1.0, 1.0, -1.0]), real, np.arange(4))
    assert kappa == pytest.approx(1.0 + 1.0 / np.var(real, ddof=1))


def test_fusion_weights_mean_one_and_ratio_kappa() -> None:
    anchor = np.array([True] * 3 + [False] * 13)
    weights = fusion_weights(anchor, 5.0)
    assert weights.mean() == pytest.approx(1.0)
    assert weights[0] / weights[-1] == pytest.approx(5.0)
    np.testing.assert_allclose(fusion_weights(anchor, 1.0), np.ones(16))


def test_sorted_window_merges_and_expires() -> None:
    window = SortedPairWindow(steps=3)
    rng = np.random.default_rng(0)
    batches = [rng.uniform(size=n) for n in (5, 0, 7, 4)]
    for i, scores in enumerate(batches):
        positions = window.add(scores, scores + i, num_groups=1)
        np.testing.assert_array_equal(window.scores[positions], scores)
        assert np.all(np.diff(window.scores) >= 0)
    expected = np.sort(np.concatenate(batches[1:]))
    np.testing.assert_array_equal(window.scores, expected)
    assert window.num_groups == 3 and set(window.ages()) == {0, 1}
    newest = window.newest(at_least=1)
    np.testing.assert_array_equal(window.scores[newest], np.sort(batches[3]))
