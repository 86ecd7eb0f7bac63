"""Statistical checks of the fusion against synthetic ground truth (known bias and noise).

Every tolerance is a multiple of the Monte-Carlo standard error over independent
replications (fixed seeds), plus, where stated, a bound on a known finite-sample effect.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

from wmrl_env.fusion import RewardFusion
from wmrl_env.fusion.groups import GroupIndex
from wmrl_env.fusion.synthetic import SyntheticWorld

Z = 4.0  # standard errors allowed: a false alarm about once in 16,000 runs


def run(fusion: RewardFusion, world: SyntheticWorld, rng, steps: int):
    """Yield (batch, output) for ``steps`` training steps, real scores only on anchors."""
    for step in range(steps):
        batch = world.sample(rng, step)
        anchors = fusion.select_anchors(batch.group_ids)
        real = np.where(anchors, batch.real_scores, np.nan)
        yield batch, fusion.step(batch.group_ids, batch.wm_scores, real)


def mean_and_se(values) -> tuple[float, float]:
    values = np.asarray(values, dtype=float)
    return float(values.mean()), float(values.std(ddof=1) / np.sqrt(values.size))


@pytest.mark.parametrize("wm_noise", [0.02, 0.1, 0.2])
def test_kappa_tracks_the_oracle_ratio(wm_noise: float) -> None:
    world = SyntheticWorld(num_groups=512, group_size=8, wm_noise=wm_noise)
    rng = np.random.default_rng(7)
    oracle = world.oracle_kappa(rng)
    per_replication = []
    for seed in range(20):
        # the oracle is kappa of the stream f (lam = 1): the gate off, so that is the stream
        fusion = RewardFusion(method="wmrl", anchor_fraction=0.25, seed=seed, wm_gate="off")
        outputs = [out for _, out in run(fusion, world, rng, steps=6)][2:]
        per_replication.append(np.mean([out.metrics["kappa_raw"] for out in outputs]))
    mean, se = mean_and_se(per_replication)
    # + 1 %: isotonic estimation error on ~10^4 pairs, O(n^-2/3), inflates residuals slightly
    assert abs(mean - oracle) <= Z * se + 0.01 * oracle, (mean, se, oracle)


def test_kappa_grows_with_world_model_noise() -> None:
    rng = np.random.default_rng(3)
    kappas = []
    for wm_noise in (0.02, 0.1, 0.2):
        world = SyntheticWorld(num_groups=512, group_size=8, wm_noise=wm_noise)
        fusion = RewardFusion(method="wmrl", anchor_fraction=0.25, seed=0, kappa_smoothing=1.0)
        kappas.append([out.kappa for _, out in run(fusion, world, rng, steps=4)][-1])
    assert kappas[0] < kappas[1] < kappas[2]


def test_calibration_cuts_world_model_error_by_a_large_factor() -> None:
    """An informative but biased, mis-scaled and drifting world model."""
    world = SyntheticWorld(
        num_groups=256,
        group_size=8,
        wm_noise=0.05,
        group_bias=0.02,
        drift_per_step=0.02,
        distortion=lambda x: 0.3 + 2.0 * x**2,
    )
    rng = np.random.default_rng(11)
    ratios = []
    for seed in range(20):
        fusion = RewardFusion(method="wmrl", seed=seed)
        batch, out = list(run(fusion, world, rng, steps=4))[-1]
        held_out = ~out.is_anchor
        raw = np.mean((batch.wm_scores[held_out] - batch.true_rewards[held_out]) ** 2)
        calibrated = np.mean((out.calibrated[held_out] - batch.true_rewards[held_out]) ** 2)
        ratios.append(raw / calibrated)
    mean, se = mean_and_se(ratios)
    assert mean - Z * se > 20.0, (mean, se)


def test_fused_advantages_rank_true_advantages_better_than_raw_world_model() -> None:
    world = SyntheticWorld(num_groups=128, group_size=8, wm_noise=0.1, drift_per_step=0.02)
    rng = np.random.default_rng(5)
    gains = []
    for seed in range(20):
        fused = RewardFusion(method="wmrl", seed=seed)
        raw = RewardFusion(method="wm", seed=seed)
        for step in range(5):
            batch = world.sample(rng, step)
            anchors = fused.select_anchors(batch.group_ids)
            out = fused.step(
                batch.group_ids, batch.wm_scores, np.where(anchors, batch.real_scores, np.nan)
            )
            raw_out = raw.step(
                batch.group_ids, batch.wm_scores, np.full(batch.wm_scores.shape, np.nan)
            )
        true = GroupIndex.from_ids(batch.group_ids).centre(batch.true_rewards)
        gains.append(spearmanr(out.advantages, true)[0] - spearmanr(raw_out.advantages, true)[0])
    mean, se = mean_and_se(gains)
    assert mean - Z * se > 0, (mean, se)


@pytest.mark.parametrize("prioritised", [False, True])
def test_ppi_batch_mean_is_unbiased_where_world_model_is_not(prioritised: bool) -> None:
    """The world model over-scores 20 % of trajectories (an exploit) and drifts."""
    world = SyntheticWorld(
        num_groups=64,
        group_size=8,
        wm_noise=0.1,
        drift_per_step=0.002,
        exploit_share=0.2,
        exploit_bonus=0.3,
    )
    rng = np.random.default_rng(13)
    ppi = RewardFusion(method="ppi", anchor_fraction=0.1, seed=1)
    wm = RewardFusion(method="wm", seed=1)
    ppi_errors, wm_errors = [], []
    for step in range(1500):
        batch = world.sample(rng, step % 50)
        group_mean = GroupIndex.from_ids(batch.group_ids).mean(batch.wm_scores)
        priorities = np.repeat(np.abs(group_mean - 0.5), 8) if prioritised else None
        anchors = ppi.select_anchors(batch.group_ids, priorities)
        real = np.where(anchors, batch.real_scores, np.nan)
        target = batch.real_scores.mean()
        ppi_errors.append(ppi.step(batch.group_ids, batch.wm_scores, real).rewards.mean() - target)
        wm_out = wm.step(batch.group_ids, batch.wm_scores, np.full(real.shape, np.nan))
        wm_errors.append(wm_out.rewards.mean() - target)
    ppi_bias, ppi_se = mean_and_se(ppi_errors[20:])
    wm_bias, wm_se = mean_and_se(wm_errors[20:])
    assert abs(ppi_bias) <= Z * ppi_se, (ppi_bias, ppi_se)
    assert abs(wm_bias) > Z * wm_se, (wm_bias, wm_se)
