"""OnlineCalibrator: isotonic fit, fallback chain, tie-break, cross-fitting, window, state."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.isotonic import IsotonicRegression

from wmrl_env.fusion.calibration import (
    CalibrationMap,
    OnlineCalibrator,
    average_ranks,
    fit_isotonic_sorted,
    spearman,
)


def test_isotonic_fit_matches_scikit_learn_increasing_with_ties() -> None:
    rng = np.random.default_rng(0)
    s = np.round(rng.uniform(size=300), 2)  # many ties
    r = s + rng.normal(0, 0.2, size=300)
    w = rng.uniform(0.5, 1.5, size=300)
    order = np.argsort(s, kind="stable")
    ours = fit_isotonic_sorted(s[order], r[order], w[order])
    reference = IsotonicRegression(increasing=True, out_of_bounds="clip").fit(s, r, sample_weight=w)
    grid = np.linspace(-0.2, 1.2, 500)
    no_tie_break = CalibrationMap("isotonic", ours.knots_x, ours.knots_y)
    np.testing.assert_allclose(no_tie_break(grid), reference.predict(grid), atol=1e-10)


def test_map_is_increasing_even_when_data_decrease_locally() -> None:
    rng = np.random.default_rng(1)
    s = rng.uniform(size=200)
    r = s + 0.3 * np.sin(12 * s)  # increasing overall, decreasing in places
    calibrator = OnlineCalibrator(min_pairs=8)
    update = calibrator.update(s, r)
    assert update.fallback is None
    grid = np.linspace(-1, 2, 1000)
    assert np.all(np.diff(calibrator.transform(grid)) > 0)  # strictly: the tie-break


def test_tie_break_keeps_a_groups_ranking_where_isotonic_pools() -> None:
    # real scores do not rise across s in [0.4, 0.6]: isotonic pools that range flat
    s = np.array([0.1, 0.2, 0.4, 0.45, 0.5, 0.55, 0.6, 0.9, 0.95, 1.0] * 4)
    r = np.array([0.0, 0.1, 0.5, 0.4, 0.5, 0.4, 0.5, 0.9, 1.0, 1.0] * 4)
    calibrator = OnlineCalibrator(min_pairs=8)
    calibrator.update(s, r, groups=np.repeat(np.arange(4), 10))
    group = np.array([0.41, 0.46, 0.5, 0.54])  # inside the pooled flat stretch
    calibrated = calibrator.transform(group)
    assert np.all(np.diff(calibrated) > 0)
    span = calibrated.max() - calibrated.min()
    assert span < 1e-3  # the ranking survives, the values barely move


@pytest.mark.parametrize(
    ("s", "r", "expected_fallback", "reason_part"),
    [
        (np.array([0.1, 0.5, 0.9]), np.array([0.0, 0.4, 1.0]), "affine", "min_pairs"),
        (np.array([0.1, 0.5, 0.9]), np.array([1.0, 0.4, 0.0]), "identity", "min_pairs"),
        (np.linspace(0, 1, 40), np.linspace(1, 0, 40), "identity", "rank correlation"),
    ],
)
def test_fallback_without_previous_map(s, r, expected_fallback, reason_part) -> None:
    update = OnlineCalibrator().update(s, r, groups=np.arange(s.size) % 4)
    assert update.fallback == expected_fallback
    assert reason_part in update.reason


def test_fallback_prefers_previous_map_then_keeps_it() -> None:
    rng = np.random.default_rng(2)
    calibrator = OnlineCalibrator(window=1)
    s = rng.uniform(size=64)
    good = calibrator.update(s, 2 * s, groups=np.arange(64) // 8)
    assert good.fallback is None
    bad = calibrator.update(s, -2 * s, groups=np.arange(64) // 8)  # broken world model
    assert bad.fallback == "previous" and "not positive" in bad.reason
    np.testing.assert_array_equal(calibrator.transform(s), good.map(s))


def test_too_few_anchor_groups_falls_back() -> None:
    s = np.linspace(0, 1, 32)
    update = OnlineCalibrator().update(s, s, groups=np.zeros(32))
    assert update.fallback == "affine" and "anchor groups" in update.reason


def test_constant_scores_fall_back_to_identity_with_a_warning() -> None:
    with pytest.warns(UserWarning, match="constant"):
        update = OnlineCalibrator().update(np.full(32, 0.7), np.linspace(0, 1, 32))
    assert update.fallback == "identity"


def test_cross_fitted_residuals_are_honest_where_in_sample_are_zero() -> None:
    rng = np.random.default_rng(3)
    s = rng.uniform(size=400)
    r = s + rng.normal(0, 0.1, size=400)
    calibrator = OnlineCalibrator(min_pairs=8)
    update = calibrator.update(s, r, groups=np.arange(400) // 8)
    in_sample = r - update.map(s)
    cross = r - update.cross_fitted
    assert np.all(np.isfinite(update.cross_fitted))
    # isotonic in-sample residuals are optimistic; cross-fitted ones estimate the noise (0.01)
    assert np.mean(in_sample**2) < np.mean(cross**2)
    assert np.mean(cross**2) == pytest.approx(0.01, rel=0.25)
    np.testing.assert_array_equal(calibrator.cross_fitted_residuals(), cross)


def test_single_anchor_group_cross_fits_from_the_window() -> None:
    calibrator = OnlineCalibrator(min_pairs=4, min_groups=1)
    s1 = np.linspace(0, 1, 8)
    calibrator.update(s1, s1 + 0.5, groups=np.zeros(8))
    s2 = np.linspace(0.05, 0.95, 8)
    update = calibrator.update(s2, s2 + 0.5, groups=np.zeros(8))
    # the only group of this step is predicted by the map fitted on the previous step alone
    assert np.all(np.isfinite(update.cross_fitted))
    np.testing.assert_allclose(update.cross_fitted, s2 + 0.5, atol=0.1)


def test_window_forgets_and_follows_drift() -> None:
    calibrator = OnlineCalibrator(window=2, decay=0.5, min_pairs=8)
    s = np.linspace(0, 1, 64)
    groups = np.arange(64) // 8
    for offset in (0.0, 0.5, 1.0, 1.5):
        calibrator.update(s, s + offset, groups)
    # only offsets 1.0 (weight 0.5) and 1.5 (weight 1) remain: weighted mean 4/3
    assert calibrator.transform(np.array([0.5]))[0] == pytest.approx(0.5 + 4 / 3, abs=0.01)


def test_state_round_trip_is_bit_identical() -> None:
    rng = np.random.default_rng(4)
    a, b = OnlineCalibrator(), OnlineCalibrator()
    for _ in range(3):
        s = rng.uniform(size=48)
        a.update(s, s**2, groups=np.arange(48) // 8)
    b.load_state_dict(a.state_dict())
    s = rng.uniform(size=48)
    ua, ub = a.update(s, s, np.arange(48) // 8), b.update(s, s, np.arange(48) // 8)
    np.testing.assert_array_equal(ua.cross_fitted, ub.cross_fitted)
    np.testing.assert_array_equal(a.transform(s), b.transform(s))


def test_update_rejects_bad_pairs() -> None:
    calibrator = OnlineCalibrator()
    with pytest.raises(ValueError, match="finite"):
        calibrator.update(np.array([0.1, np.nan]), np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match="equal 1-D"):
        calibrator.update(np.array([0.1, 0.2]), np.array([0.0]))


def test_ranks_and_spearman_handle_ties() -> None:
    x = np.array([2.0, 2.0, 1.0, 3.0])
    np.testing.assert_array_equal(average_ranks(x), [1.5, 1.5, 0.0, 3.0])
    assert np.isnan(spearman(np.ones(5), np.arange(5.0)))
    assert spearman(np.arange(5.0), np.arange(5.0) ** 3) == pytest.approx(1.0)
