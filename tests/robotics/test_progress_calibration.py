"""The calibration of a dense progress return against sparse success: the within-start slope
recovers a known one, an uninformative progress model is gated out, failures keep their order
when progress separates them from successes, and in a GRPO toy with a known truth the affine
calibration keeps the dense gain while never doing worse than the sparse reward."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

from wmrl_env.robotics.dense_reward import ProgressReward
from wmrl_env.robotics.progress import DenseProgressFusion, ProgressModel
from wmrl_env.robotics.progress_calibration import ProgressCalibration, within_group_slope


def _toy():
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "dense_calibration.py"
    spec = importlib.util.spec_from_file_location("dense_calibration", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_within_group_slope_recovers_a_known_slope_despite_start_offsets() -> None:
    rng = np.random.default_rng(0)
    groups = np.repeat(np.arange(50), 4)
    offset = rng.normal(size=50)[groups]  # hard starts: more progress, less success
    made = offset + rng.uniform(size=200)
    success = 0.8 * (made - offset) - 2.0 * offset + rng.normal(0, 0.1, 200)
    slope, t = within_group_slope(made, success, groups)
    assert abs(slope - 0.8) < 4 * slope / t, (slope, t)  # within 4 standard errors
    pooled = np.polyfit(made, success, 1)[0]
    assert pooled < 0  # what a pooled fit would say
    assert within_group_slope(made[:2], success[:2], groups[:2]) == (0.0, 0.0)  # no dof


def test_an_uninformative_progress_model_is_gated_out() -> None:
    """A random progress return keeps its slope (t >= 2, one-sided) in about 2.5 % of fits:
    of 200 independent fits, 5 expected, sd 2.2; more than 15 fails."""
    rng = np.random.default_rng(1)
    groups = np.repeat(np.arange(16), 4)
    opened = 0
    for _ in range(200):
        calibration = ProgressCalibration("affine")
        calibration.update(rng.uniform(size=64), rng.random(64) < 0.5, groups)
        opened += calibration.gate_open
        if not calibration.gate_open:  # the calibrated progress is one constant
            assert np.ptp(calibration.transform(rng.uniform(size=10))) == 0.0
    assert opened <= 15, opened


def _separated(rng: np.random.Generator, n_groups: int = 8):
    """Lift-like pairs: successes at progress 0.85-1, failures spread over 0-0.76."""
    groups = np.repeat(np.arange(n_groups), 4)
    success = np.tile([1.0, 1.0, 0.0, 0.0], n_groups)
    made = np.where(success > 0, rng.uniform(0.85, 1.0, groups.size), 0.0)
    made[success == 0] = rng.uniform(0.0, 0.76, int((success == 0).sum()))
    return made, success, groups


def test_failures_keep_their_order_where_isotonic_makes_a_step() -> None:
    made, success, groups = _separated(np.random.default_rng(2))
    probe = np.sort(made[success == 0])[[0, -1]]  # the failures' least and most progress
    values = {}
    for kind in ("affine", "isotonic"):
        calibration = ProgressCalibration(kind)
        calibration.update(made, success, groups)
        values[kind] = np.diff(calibration.transform(probe))[0]
    assert values["isotonic"] < 0.01  # the step: the dense signal is gone
    assert values["affine"] > 0.3 * np.ptp(probe)  # a line keeps it (slope about 1 here)


def test_the_dense_reward_keeps_the_failures_order_by_default() -> None:
    """ProgressReward's default calibration (isotonic before: a step)."""
    episodes = [(np.linspace(0, end, 6)[:, None] * [1.0, 0.0], end > 0.9) for end in (1.0, 0.4)]
    scorer = ProgressReward(ProgressModel(seed=0).pretrain(episodes * 10), min_pairs=8)
    made, success, groups = _separated(np.random.default_rng(3))
    scorer.calibrator.update(made, success, groups)
    assert scorer.calibrated(0.7) - scorer.calibrated(0.05) > 0.3
    fusion = DenseProgressFusion(min_pairs=8)
    rewards, _ = fusion.step(groups, made, success)
    failures = success == 0
    assert np.ptp(rewards[failures]) > 0.15


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="calibration must be one of"):
        ProgressCalibration("spline")
    with pytest.raises(ValueError, match="one shape"):
        ProgressCalibration().update(np.zeros(3), np.zeros(2), np.zeros(3))
    with pytest.raises(ValueError, match="finite"):
        ProgressCalibration().update(np.array([np.nan]), np.zeros(1), np.zeros(1))
    calibration = ProgressCalibration()
    assert not calibration.gate_open  # before any fit: the sparse success alone
    assert np.ptp(calibration.transform(np.array([0.0, 1.0]))) == 0.0


@pytest.mark.slow
def test_grpo_toy_affine_keeps_the_dense_gain_and_is_never_worse() -> None:
    """120 paired seeds of the toy (benchmarks/dense_calibration.py): with informative
    progress the affine calibration beats the sparse reward by more than 4 standard errors;
    with a random progress model it is within 4 standard errors and 0.01 of it, where the
    isotonic calibration does worse than both by more than 4 standard errors."""
    toy = _toy()

    def paired(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
        diff = a - b
        return float(diff.mean()), float(diff.std(ddof=1) / math.sqrt(diff.size))

    good = toy.compare(120, informative=True)
    gain, se = paired(good["affine"], good["sparse"])
    assert gain > 4 * se and gain > 0.05, (gain, se)
    random = toy.compare(120, informative=False)
    change, se = paired(random["affine"], random["sparse"])
    assert change > -max(4 * se, 0.01), (change, se)
    harm, se = paired(random["isotonic"], random["affine"])
    assert harm < -4 * se, (harm, se)
