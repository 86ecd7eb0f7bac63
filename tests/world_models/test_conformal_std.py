"""The coverage scale shared by ConformalStd and world models v2 and v3: the scale it finds
covers at the nominal rates, the worst group decides, ties go to the first floor, and the
numbers ConformalStd gave before the scale was shared are pinned."""

from __future__ import annotations

import numpy as np
import pytest

from wmrl_env.world_models.conformal_std import NOMINAL, ConformalStd, coverage_scale


def test_the_scale_of_half_normal_errors_is_their_sigma():
    errors = np.abs(np.random.default_rng(0).normal(0.0, 3.0, size=20_000))
    scale, floor = coverage_scale({0.0: [errors]})
    assert floor == 0.0
    # +-1 sigma and +-1.96 sigma cover 68.3 % and 95 % of a normal error: the scale is sigma,
    # up to the sampling error of a quantile of 20,000 draws (about 0.3 % of sigma)
    assert scale == pytest.approx(3.0, rel=0.02)
    assert np.mean(errors <= scale) == pytest.approx(0.683, abs=0.01)
    assert np.mean(errors <= 1.96 * scale) == pytest.approx(0.95, abs=0.01)


def test_the_worst_group_decides():
    rng = np.random.default_rng(1)
    narrow = np.abs(rng.normal(0.0, 1.0, size=5000))
    wide = np.abs(rng.normal(0.0, 2.0, size=5000))
    scale, _ = coverage_scale({0.0: [narrow, wide]})
    alone, _ = coverage_scale({0.0: [np.concatenate([narrow, wide])]})
    # one scale for both groups: between their sigmas, where their coverage errors balance
    assert 1.0 < scale < 2.0
    cost = max(abs(np.mean(z <= k * scale) - p) for z in (narrow, wide) for k, p in NOMINAL)
    pooled = max(abs(np.mean(z <= k * alone) - p) for z in (narrow, wide) for k, p in NOMINAL)
    assert cost <= pooled


def test_ties_go_to_the_first_floor_and_no_positive_scale_gives_one():
    errors = np.abs(np.random.default_rng(2).normal(size=500))
    assert coverage_scale({0.1: [errors], 0.0: [errors]})[1] == 0.1
    # a scale of 0 would claim certainty: never chosen
    assert coverage_scale({0.0: [np.zeros(100)]}) == (1.0, 0.0)
    mostly_exact = np.r_[np.zeros(60), np.abs(np.random.default_rng(3).normal(size=40))]
    assert coverage_scale({0.0: [mostly_exact]})[0] > 0


@pytest.mark.parametrize(
    ("seed", "scale", "floor"),
    [
        # what ConformalStd fitted at 5f8b0f9, before its fit became coverage_scale
        (0, 0.9709284910276766, 0.0),
        (1, 1.4798712398291254, 0.1),
        (2, 2.210644164559963, 0.1),
        (3, 4.472207293077105, 0.03),  # 10 spreads of 0: the floor 0 is left out
    ],
)
def test_conformal_std_fits_what_it_fitted_before(seed, scale, floor):
    rng = np.random.default_rng(seed)
    spread = rng.uniform(0.02, 0.2, size=300)
    residual = np.abs(rng.normal(0.0, (1.0 + seed) * spread + 0.02 * seed))
    if seed == 3:
        spread[:10] = 0.0
    calibration = ConformalStd(window=300, floors=(0.0, 0.01, 0.03, 0.1))
    calibration.add(residual, spread)
    assert (calibration.scale, calibration.floor) == (scale, floor)
