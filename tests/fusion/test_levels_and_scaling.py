"""Issue 23, items 3-6: per-group scaling keeps the world model's weight, kappa weighs the
stream used, and fits under unequal inclusion probabilities use ``1 / pi``."""

from __future__ import annotations

import numpy as np
import pytest

from wmrl_env.fusion import OnlineCalibrator, RewardFusion
from wmrl_env.fusion.kappa import within_group_variances

GROUP_IDS = np.repeat(np.arange(8), 8)


def a_batch(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    real = rng.uniform(size=64)
    wm = real + 0.1 * rng.normal(size=64)
    anchors = np.repeat(np.arange(8) < 4, 8)
    return wm, real, anchors


@pytest.mark.parametrize("lam", [0.01, 0.3])
def test_group_scaling_keeps_the_world_models_weight(lam: float) -> None:
    """Dividing each group by its own std used to erase lam (advantages for lam = 0.01 equal
    those for lam = 1); now world-model groups scale by the natural rewards' group std."""
    wm, real, anchors = a_batch()
    per_weight = {}
    for weight in (lam, 1.0):
        fusion = RewardFusion(method="wmrl", advantage_scaling="group", min_pairs=8)
        fusion.gate.weight = weight  # the weight earlier steps would have earned
        out = fusion.step(GROUP_IDS, wm, np.where(anchors, real, np.nan))
        assert out.metrics["wm_weight"] == weight
        per_weight[weight] = (out.advantages / out.weights)[~anchors]
    np.testing.assert_allclose(per_weight[lam], lam * per_weight[1.0], atol=1e-12)


def test_group_scaling_is_refused_for_ppi() -> None:
    with pytest.raises(ValueError, match="1/pi rectification"):
        RewardFusion(method="ppi", advantage_scaling="group")


def test_world_model_groups_sit_at_the_calibrated_level_while_the_gate_is_shut() -> None:
    wm, real, anchors = a_batch()
    fusion = RewardFusion(method="wmrl", min_pairs=8)
    out = fusion.step(GROUP_IDS, wm, np.where(anchors, real, np.nan))
    assert out.metrics["wm_weight"] == 0.0
    level = out.calibrated.reshape(8, 8).mean(axis=1)
    np.testing.assert_allclose(out.rewards.reshape(8, 8)[4:], np.repeat(level[4:, None], 8, 1))
    assert out.metrics["reward_mean"] == pytest.approx(np.nanmean(out.calibrated), abs=0.05)


def test_kappa_weighs_the_stream_actually_used() -> None:
    """An exact world model while the gate is still shut (lam = 0): the stream used is 0, its
    error is the whole real variance, so kappa = 1 + 1 = 2 (it was 1, the error of f)."""
    _, real, anchors = a_batch()
    fusion = RewardFusion(method="wmrl", min_pairs=8, kappa_smoothing=1.0)
    out = fusion.step(GROUP_IDS, real, np.where(anchors, real, np.nan))
    assert out.metrics["wm_weight"] == 0.0
    assert out.metrics["kappa_raw"] == pytest.approx(2.0)


def test_calibration_weighs_pairs_by_their_design_weight() -> None:
    """Two pairs per score, the lower drawn with pi = 1/3, the higher with pi = 1: at 0.5
    the population mean is (3 * 0 + 1 * 1) / 4 (unweighted: 0.5)."""
    s = np.array([0.2, 0.2, 0.5, 0.5, 0.8, 0.8])
    r = np.array([0.0, 0.5, 0.0, 1.0, 0.5, 1.0])
    w = np.array([3.0, 1.0, 3.0, 1.0, 3.0, 1.0])
    calibrator = OnlineCalibrator(min_pairs=2, min_groups=1)
    calibrator.update(s, r, np.arange(6), weights=w)
    assert calibrator.transform(np.array([0.5]))[0] == pytest.approx(0.25, abs=1e-3)


def test_kappa_variances_weigh_groups_by_their_design_weight() -> None:
    residuals = np.array([1.0, -1.0, 2.0, -2.0])
    real = np.array([1.0, -1.0, 1.0, -1.0])
    groups = np.array([0, 0, 1, 1])
    sigma2_e, sigma2_r, _ = within_group_variances(
        residuals, real, groups, weights=np.array([3.0, 3.0, 1.0, 1.0])
    )
    assert sigma2_e == pytest.approx((3 * 2 + 1 * 8) / 4)
    assert sigma2_r == pytest.approx(2.0)
