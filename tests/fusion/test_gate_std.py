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


def sure_good_unsure_poor(sigma: np.ndarray) -> np.ndarray:
    """A slope that falls with the std: 0.5 where the world model is sure (``sigma < 1``, half
    the members), -0.1 where it is not; the unweighted slope is ``lam* = 0.2``."""
    return np.where(sigma < 1.0, 0.5, -0.1)


LAM_STAR = 0.2
# P(weight outside [0, 2 lam*]) per step: target 0.05; one step's rate over RUNS runs has
# s.e. sqrt(0.05 * 0.95 / RUNS)
NEVER_WORSE_SLACK = 4 * np.sqrt(0.05 * 0.95 / RUNS)


@pytest.mark.parametrize("scales", ["lognormal", "heavy"])
def test_a_slope_that_varies_with_the_std_keeps_the_weight_never_worse(scales: str) -> None:
    """Good where sure, poor where unsure: the precision-weighted slope lies above ``lam*``
    (0.36 here), a weight bounded on it left ``[0, 2 lam*]``; the gate's weight does not."""
    weights, weighted = simulate_gate(RUNS, STEPS, sure_good_unsure_poor, 3, scales, "informative")
    outside = ((weights < 0) | (weights > 2 * LAM_STAR)).mean(axis=0)
    assert outside.mean() <= 0.05, outside.mean()
    assert outside.max() <= 0.05 + NEVER_WORSE_SLACK, outside.max()
    assert np.nanmean(weighted[:, -10:]) > 1.5 * LAM_STAR  # the weighted slope is the wrong one


def test_the_gate_itself_keeps_never_worse_when_the_slope_varies_with_the_std() -> None:
    """The same world, through :class:`WorldModelGate` (300 runs of 30 steps, two groups of
    8 per step, the std reported truthfully). Before the unweighted bound the weight left
    ``[0, 2 lam*]`` in most steps once open."""
    runs, steps = 300, 30
    rng = np.random.default_rng(7)
    groups = np.repeat([0, 1], 8)
    outside = np.zeros(steps - 1)
    for _ in range(runs):
        gate = WorldModelGate()
        for step in range(steps):
            if step:
                outside[step - 1] += not 0.0 <= gate.weight <= 2 * LAM_STAR
            scale = np.repeat(rng.lognormal(0.0, 0.7, 2), 8)
            sigma = rng.lognormal(0.0, 0.8, 16)
            f = scale * rng.normal(size=16)
            r = sure_good_unsure_poor(sigma) * f + scale * sigma * rng.standard_t(5, 16)
            gate.update(r, f, groups, std=scale * sigma)
    rate = outside / runs
    assert rate.mean() <= 0.05 + 4 * np.sqrt(0.05 * 0.95 / (runs * (steps - 1))), rate.mean()
    assert rate.max() <= 0.05 + 4 * np.sqrt(0.05 * 0.95 / runs), rate.max()


@pytest.mark.parametrize("std", ["informative", "random"])
def test_the_std_does_not_move_the_weight(std: str) -> None:
    """The weight is the unweighted slope's whatever the std reports (the std's power came
    from assuming the slope does not depend on it; docs/fusion.md)."""
    with_std, weighted = simulate_gate(300, 30, 0.3, 2, "lognormal", std)
    plain, unweighted = simulate_gate(300, 30, 0.3, 2, "lognormal", "none")
    np.testing.assert_array_equal(with_std, plain)
    assert not np.allclose(weighted, unweighted, equal_nan=True)


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
    assert weighted.gate.weighted_estimate != plain.gate.weighted_estimate
    # the weight and its slope are the unweighted ones whatever the std
    assert weighted.gate.estimate == plain.gate.estimate == ignored.gate.estimate
    assert weighted.wm_weight == plain.wm_weight == ignored.wm_weight
    # ignored, or constant (equal weights): the weighted slope is the unweighted one
    assert ignored.gate.weighted_estimate == plain.gate.estimate
    assert constant.gate.weighted_estimate == pytest.approx(plain.gate.estimate, rel=1e-12)


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
    assert gate.weighted_estimate == twin.weighted_estimate


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
