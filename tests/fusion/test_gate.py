"""The world model's weight: zero without evidence, near the regression slope with it."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from wmrl_env.fusion import WorldModelGate

GROUPS = np.repeat([0, 1], 8)  # two anchor groups of 8 per step


def fill(gate: WorldModelGate, rng, slope: float, steps: int) -> None:
    for _ in range(steps):
        f = rng.normal(size=16)
        gate.update(slope * f + rng.normal(size=16), f, GROUPS)


def test_a_useless_world_model_gets_weight_zero_but_for_alpha_of_the_time() -> None:
    """With no relation, ``P(weight > 0) = P(lower bound > 0) <= alpha`` (one-sided level);
    over 400 independent replications the share must stay within 4 binomial s.e."""
    alpha, n = 0.05, 400
    rng = np.random.default_rng(0)
    opened = []
    for _ in range(n):
        gate = WorldModelGate(window=16, alpha=alpha)
        fill(gate, rng, slope=0.0, steps=16)
        opened.append(gate.weight > 0)
    share = np.mean(opened)
    assert share <= alpha + 4 * np.sqrt(alpha * (1 - alpha) / n), share


def test_an_informative_world_model_keeps_most_of_its_weight() -> None:
    rng = np.random.default_rng(1)
    weights, estimates = [], []
    for _ in range(100):
        gate = WorldModelGate(window=16)
        fill(gate, rng, slope=0.8, steps=16)
        weights.append(gate.weight)
        estimates.append(gate.estimate)
    mean, se = np.mean(estimates), np.std(estimates, ddof=1) / 10
    assert abs(mean - 0.8) <= 4 * se  # the pooled slope is unbiased
    assert 0.6 < np.mean(weights) < 0.8  # the bound costs about t * se = 0.1


def test_weight_is_clipped_and_needs_two_groups() -> None:
    gate = WorldModelGate()
    f = np.linspace(-1, 1, 8)
    assert gate.update(5 * f, f, np.zeros(8)) == 0.0  # one group: no standard error
    rng = np.random.default_rng(2)
    fill(gate, rng, slope=5.0, steps=8)
    assert gate.weight == 1.0 and gate.estimate > 4


def test_the_window_forgets_and_resumes_bit_identically() -> None:
    rng = np.random.default_rng(3)
    gate = WorldModelGate(window=4)
    fill(gate, rng, slope=1.0, steps=4)
    assert gate.weight > 0
    state = pickle.loads(pickle.dumps(gate.state_dict()))
    fill(gate, rng, slope=0.0, steps=4)  # the informative steps age out
    assert gate.weight == pytest.approx(0.0, abs=0.3)
    twin = WorldModelGate(window=4)
    twin.load_state_dict(state)
    rng_a, rng_b = np.random.default_rng(4), np.random.default_rng(4)
    fill(twin, rng_a, slope=0.5, steps=2)
    restored = WorldModelGate(window=4)
    restored.load_state_dict(state)
    fill(restored, rng_b, slope=0.5, steps=2)
    assert (twin.weight, twin.estimate) == (restored.weight, restored.estimate)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="window"):
        WorldModelGate(window=0)
    with pytest.raises(ValueError, match="alpha"):
        WorldModelGate(alpha=0.7)
