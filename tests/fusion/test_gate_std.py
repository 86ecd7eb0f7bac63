"""The world model's std in the gate: weighted least squares with a learnt exponent.

Simulated as in ``test_gate.py`` (1,500 runs of 60 steps, two anchor groups of 8 per step,
lognormal and heavy-tailed cluster scales shared by scores and noise), plus member noise stds
lognormal(0, 0.8) that the world model reports truthfully ("informative") or not at all
("random": an independent draw). Variants share their random draws (same seed), so their
differences are paired.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from wmrl_env.fusion import RewardFusion, WorldModelGate
from wmrl_env.fusion.precision import StdExponent
from wmrl_env.fusion.synthetic import SyntheticWorld, simulate_gate

RUNS, STEPS = 1500, 60
# one step's rate over 1,500 runs has s.e. sqrt(p(1-p)/1500) = 0.0066 at p = 0.07
PER_STEP_SLACK = 4 * np.sqrt(0.07 * 0.93 / RUNS)


@pytest.mark.parametrize("scales", ["lognormal", "heavy"])
@pytest.mark.parametrize("std", ["informative", "random"])
def test_weighted_slope_keeps_the_coverage(scales: str, std: str) -> None:
    weights, _ = simulate_gate(RUNS, STEPS, 0.0, 1, scales, std)
    per_step = (weights > 0).mean(axis=0)
    assert per_step.mean() <= 0.07, per_step.mean()
    assert per_step.max() <= 0.07 + PER_STEP_SLACK, per_step.max()


def paired_gain(scales: str, std: str) -> tuple[float, float]:
    """Mean over runs of (weighted - unweighted) mean weight at lam* = 0.3, and its s.e."""
    weighted, _ = simulate_gate(RUNS, STEPS, 0.3, 2, scales, std)
    plain, _ = simulate_gate(RUNS, STEPS, 0.3, 2, scales, "none")
    diff = weighted.mean(axis=1) - plain.mean(axis=1)
    return float(diff.mean()), float(diff.std(ddof=1) / np.sqrt(RUNS))


@pytest.mark.parametrize("scales", ["lognormal", "heavy"])
def test_an_informative_std_buys_power_and_a_random_one_costs_none(scales: str) -> None:
    """Measured: +0.081 (lognormal) / +0.065 (heavy) mean weight with an informative std
    (0.113 -> 0.194, 0.080 -> 0.145); with a random std -0.002 / 0.000. The bounds are 4
    standard errors of the paired per-run difference (over 1,500 independent runs)."""
    gain, se = paired_gain(scales, "informative")
    assert gain > 0.04 and gain > 4 * se, (gain, se)
    loss, se = paired_gain(scales, "random")
    assert loss > -4 * se - 0.005, (loss, se)  # 0.005: a loss too small to matter


def test_the_exponent_is_learnt_from_the_residuals() -> None:
    rng = np.random.default_rng(0)
    honest, random = StdExponent(), StdExponent()
    for _ in range(30):
        std = rng.lognormal(0.0, 0.8, 16)
        errors = std * rng.standard_t(5, 16)
        honest.update(std, errors)
        random.update(rng.lognormal(0.0, 0.8, 16), errors)
    assert honest.beta > 0.8
    assert random.beta < 0.2
    assert StdExponent().beta == 0.0  # no evidence: unweighted


def informative_run(gate_std: str, reported: str, steps: int = 12) -> RewardFusion:
    world = SyntheticWorld(num_groups=16, group_size=8, real_noise=0.15, noise_spread=0.8)
    rng = np.random.default_rng(3)
    fusion = RewardFusion(
        method="wmrl", anchor_fraction=0.25, min_pairs=8, seed=0, gate_std=gate_std
    )
    for step in range(steps):
        b = world.sample(rng, step)
        std = {"true": b.wm_std, "constant": np.full(b.wm_std.size, 0.3), "none": None}[reported]
        anchors = fusion.select_anchors(b.group_ids)
        fusion.step(b.group_ids, b.wm_scores, np.where(anchors, b.real_scores, np.nan), wm_std=std)
    return fusion


def test_the_fusion_passes_the_std_to_the_gate() -> None:
    plain = informative_run("wls", "none")
    weighted = informative_run("wls", "true")
    ignored = informative_run("ignore", "true")
    constant = informative_run("wls", "constant")
    assert weighted.gate.std_exponent.beta > 0.5
    assert weighted.gate.estimate != plain.gate.estimate
    # ignored, or constant (equal weights): exactly the unweighted gate
    assert ignored.gate.estimate == plain.gate.estimate
    assert constant.gate.estimate == pytest.approx(plain.gate.estimate, rel=1e-12)


def test_the_exponent_is_saved_with_the_gate() -> None:
    rng = np.random.default_rng(4)
    gate = WorldModelGate()
    groups = np.repeat([0, 1], 8)
    for _ in range(8):
        f, std = rng.normal(size=16), rng.lognormal(0.0, 0.8, 16)
        gate.update(0.5 * f + std * rng.normal(size=16), f, groups, std=std)
    twin = WorldModelGate()
    twin.load_state_dict(pickle.loads(pickle.dumps(gate.state_dict())))
    assert twin.std_exponent.beta == gate.std_exponent.beta > 0
    f, std = rng.normal(size=16), rng.lognormal(0.0, 0.8, 16)
    r = 0.5 * f + std * rng.normal(size=16)
    assert gate.update(r, f, groups, std=std) == twin.update(r, f, groups, std=std)
    assert gate.estimate == twin.estimate


def test_bad_wm_std() -> None:
    fusion = RewardFusion(method="wmrl", seed=0)
    ids = np.repeat([0, 1], 2)
    wm, real = np.full(4, 0.5), np.array([1.0, 0.0, np.nan, np.nan])
    with pytest.raises(ValueError, match="wm_std has shape"):
        fusion.step(ids, wm, real, wm_std=np.ones(3))
    with pytest.raises(ValueError, match="wm_std has 2 NaN/inf/negative"):
        fusion.step(ids, wm, real, wm_std=np.array([np.nan, 1.0, -1.0, 1.0]))
    # where the prediction is invalid (its group executed) the std is not looked at
    out = fusion.step(
        ids,
        wm,
        real,
        wm_valid=np.array([False, True, True, True]),
        wm_std=np.array([np.nan, 1.0, 1.0, 1.0]),
    )
    assert out.is_anchor[:2].all()
    with pytest.raises(ValueError, match="gate_std"):
        RewardFusion(gate_std="maybe")


def test_the_regime_model_reports_a_std_to_the_gate() -> None:
    from wmrl_env.fusion.regime import Regime, train

    regime = Regime(rounds=6, noise_spread=1.0)
    trace: list[dict] = []
    score, executions = train(regime, "wmrl", "fair", 0, trace, wm_std="informative")
    assert 0 < score <= 1 and executions == 6 * 16
    plain = Regime(rounds=6)
    assert train(plain, "wmrl", "fair", 0) == train(plain, "wmrl", "fair", 0, wm_std="none")
    with pytest.raises(ValueError, match="wm_std"):
        train(regime, "wmrl", "fair", 0, wm_std="honest")
