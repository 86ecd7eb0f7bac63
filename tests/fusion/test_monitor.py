"""Reward-hacking monitor: no alarm under a stationary world model, an alarm under a drifting one.

The fusion runs on ``SyntheticWorld`` batches (64 groups of 8, 10 % anchors); the monitor
sees the cross-fitted anchor gap of each step.
"""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest

from wmrl_env.fusion import GapMonitor, RewardFusion, RewardHackingWarning
from wmrl_env.fusion.synthetic import SyntheticWorld

WORLD = SyntheticWorld(num_groups=64, group_size=8, wm_noise=0.05, group_bias=0.05)
STEPS = 80


def run(seed: int, offset=lambda step: 0.0, method: str = "wmrl"):
    """Alarm flags per step, and the warnings raised, for one training run."""
    fusion = RewardFusion(method=method, anchor_fraction=0.1, seed=seed)
    rng = np.random.default_rng(seed + 1000)
    alarms = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for step in range(STEPS):
            b = WORLD.sample(rng)
            wm = b.wm_scores + offset(step)  # the world model's over-scoring at this step
            anchors = fusion.select_anchors(b.group_ids)
            out = fusion.step(b.group_ids, wm, np.where(anchors, b.real_scores, np.nan))
            alarms.append(out.metrics["hacking_alarm"])
    hacking = [w for w in caught if issubclass(w.category, RewardHackingWarning)]
    return np.array(alarms), hacking


def test_no_alarm_under_a_stationary_world_model() -> None:
    """The one-sided test runs at alpha = 0.001 per step; gaps of neighbouring steps share
    calibration data, so the per-step rate is bounded loosely: at most 1 % of 40 x 64
    tested steps (4 binomial s.e. above 0.001 is 0.0034)."""
    steps = [run(seed)[0] for seed in range(40)]
    tested = np.concatenate([a[16:] for a in steps])
    assert tested.mean() <= 0.01, tested.mean()


def test_alarm_soon_after_the_world_model_starts_drifting_faster_and_faster() -> None:
    """From step 30 the world model over-scores by 0.0015 * (t - 30)^2: online calibration
    lags behind, so the anchor gap grows. Alarm in every run within 30 steps (by then the
    over-scoring is 1.35), warned once per alarm episode."""
    onset = 30

    def drift(step: int) -> float:
        return 0.0015 * max(step - onset, 0) ** 2

    delays = []
    for seed in range(10):
        alarms, warned = run(seed, drift)
        assert not alarms[:onset].any()
        first = int(np.flatnonzero(alarms)[0])
        delays.append(first - onset)
        episodes = int(np.sum(np.diff(np.r_[0, alarms]) == 1))
        assert len(warned) == episodes >= 1
    assert max(delays) <= 30, delays


def test_off_under_real_rewards_where_no_world_model_is_used() -> None:
    """The same drifting world model as above alarms under ``wmrl``; under ``real`` the
    rewards never use it (the bench's ``real`` arm), so the monitor stays silent."""

    def drift(step: int) -> float:
        return 0.0015 * max(step - 30, 0) ** 2

    assert run(0, drift)[0].any()
    alarms, warned = run(0, drift, method="real")
    assert not alarms.any() and warned == []


def test_monitor_resumes_bit_identically() -> None:
    rng = np.random.default_rng(0)
    gaps = np.r_[rng.normal(0, 0.01, 20), np.linspace(0, 0.3, 10)]
    monitor = GapMonitor(window=8)
    for gap in gaps[:15]:
        monitor.update(gap)
    twin = GapMonitor(window=8)
    twin.load_state_dict(pickle.loads(pickle.dumps(monitor.state_dict())))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = [monitor.update(g) for g in gaps[15:]]
        b = [twin.update(g) for g in gaps[15:]]
    assert a == b and a[-1].alarm and monitor.alarms == twin.alarms == 1


def test_steps_without_anchors_add_no_gap_but_keep_time() -> None:
    monitor = GapMonitor(window=3)
    for gap in (0.0, float("nan"), 0.1, float("nan"), 0.2):
        reading = monitor.update(gap)
    assert reading.trend == pytest.approx(0.05)  # gaps at updates 0, 2, 4


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="window"):
        GapMonitor(window=2)
    with pytest.raises(ValueError, match="alpha"):
        GapMonitor(alpha=0.0)
