"""The world model's weight: zero without evidence, near the regression slope with it.

The coverage tests simulate 1,500 runs of 60 steps at once (two anchor groups of 8 per step,
each its own cluster), with cluster scales shared by the calibrated scores and the noise —
high-leverage clusters are also the noisy ones, where a plain cluster-robust standard error
(CR1, the gate before issue 23) opened 0.10 (lognormal) and 0.17 (heavy tails) of the steps.
"""

from __future__ import annotations

import pickle
import time

import numpy as np
import pytest

from wmrl_env.fusion import WorldModelGate
from wmrl_env.fusion.gate import slope_bound

GROUPS = np.repeat([0, 1], 8)  # two anchor groups of 8 per step
RUNS, STEPS, DECAY = 1500, 60, 0.95
# Monte-Carlo error: one step's rate over 1,500 runs has s.e. sqrt(p(1-p)/1500) = 0.0066 at
# p = 0.07, so a single step may sit 4 s.e. above the 0.07 target: 0.097.
PER_STEP_SLACK = 4 * np.sqrt(0.07 * 0.93 / RUNS)


def fill(gate: WorldModelGate, rng, slope: float, steps: int) -> None:
    for _ in range(steps):
        f = rng.normal(size=16)
        gate.update(slope * f + rng.normal(size=16), f, GROUPS)


def simulated_weights(scales: str, slope: float, seed: int) -> np.ndarray:
    """The gate's weight at steps 1..59 of ``RUNS`` runs, shape ``(RUNS, STEPS - 1)``."""
    rng = np.random.default_rng(seed)
    shape = (RUNS, STEPS, 2, 1)
    if scales == "lognormal":
        scale = rng.lognormal(0.0, 0.7, shape)
    else:  # heavy tails: |t_2| scales (infinite variance) and t_5 noise
        scale = np.abs(rng.standard_t(2, shape)) + 0.05
    f = scale * rng.normal(size=(RUNS, STEPS, 2, 8))
    f -= f.mean(-1, keepdims=True)
    r = slope * f + scale * rng.standard_t(5, (RUNS, STEPS, 2, 8))
    r -= r.mean(-1, keepdims=True)
    sxy = (r * f).sum(-1).reshape(RUNS, -1)
    sxx = (f * f).sum(-1).reshape(RUNS, -1)
    weights = np.empty((RUNS, STEPS - 1))
    for step in range(1, STEPS):  # the weight used at `step` pools steps 0..step-1
        age = np.repeat(DECAY ** np.arange(step - 1, -1, -1.0), 2)
        k = 2 * step
        weights[:, step - 1] = slope_bound(sxy[:, :k] * age, sxx[:, :k] * age, 0.05).weight
    return weights


@pytest.mark.parametrize("scales", ["lognormal", "heavy"])
def test_a_useless_world_model_opens_the_gate_at_most_7_percent_of_steps(scales: str) -> None:
    opened = simulated_weights(scales, slope=0.0, seed=1) > 0
    per_step = opened.mean(axis=0)
    assert per_step.mean() <= 0.07, per_step.mean()
    assert per_step.max() <= 0.07 + PER_STEP_SLACK, per_step.max()


@pytest.mark.parametrize("scales", ["lognormal", "heavy"])
def test_the_weight_stays_in_the_never_worse_range(scales: str) -> None:
    """``lam* = 0.3``: the weight leaves ``[0, 2 lam*]`` at most 7 % of the steps. With
    lognormal scales it keeps more than half of ``lam*`` on average over the run (the issue's
    power target); with |t_2| scales it measured 0.116 (docs/fusion.md), not asserted."""
    weights = simulated_weights(scales, slope=0.3, seed=2)
    outside = (weights > 0.6).mean(axis=0)
    assert outside.mean() <= 0.07, outside.mean()
    assert outside.max() <= 0.07 + PER_STEP_SLACK, outside.max()
    if scales == "lognormal":
        assert weights.mean() > 0.15, weights.mean()


def test_the_gate_computes_what_slope_bound_computes() -> None:
    rng = np.random.default_rng(5)
    gate = WorldModelGate(decay=0.9)
    sums = []
    for _ in range(6):
        f = rng.normal(size=16)
        r = 0.5 * f + rng.normal(size=16)
        gate.update(r, f, GROUPS)
        fc = f.reshape(2, 8) - f.reshape(2, 8).mean(1, keepdims=True)
        rc = r.reshape(2, 8) - r.reshape(2, 8).mean(1, keepdims=True)
        sums = [(a * 0.9, b * 0.9) for a, b in sums]
        sums += [((rc * fc).sum(1)[i], (fc * fc).sum(1)[i]) for i in range(2)]
    expected = slope_bound(np.array([a for a, _ in sums]), np.array([b for _, b in sums]), 0.05)
    assert gate.estimate == pytest.approx(expected.estimate[0])
    assert gate.weight == pytest.approx(expected.weight[0])
    assert gate.num_clusters == 12


def test_a_task_that_recurs_is_one_cluster() -> None:
    """The same two tasks every step: two clusters, however many steps (issue 23, item 1:
    the old gate counted each (step, group) as a cluster: 32 'independent' clusters)."""
    rng = np.random.default_rng(6)
    gate = WorldModelGate()
    for _ in range(16):
        f = rng.normal(size=16)
        gate.update(f + rng.normal(size=16), f, GROUPS, clusters=np.repeat(["a", "b"], 8))
    assert gate.num_clusters == 2
    assert gate.dof < 2


def test_design_weights_weigh_clusters() -> None:
    f = np.tile(np.linspace(-1, 1, 8), 2)
    r = np.concatenate([f[:8], -f[8:]])  # slope +1 in group 0, -1 in group 1
    gate = WorldModelGate()
    gate.update(r, f, GROUPS, weights=np.repeat([3.0, 1.0], 8))
    assert gate.estimate == pytest.approx(0.5)  # (3 - 1) / (3 + 1)


def test_an_informative_world_model_keeps_most_of_its_weight() -> None:
    rng = np.random.default_rng(1)
    weights, estimates = [], []
    for _ in range(100):
        gate = WorldModelGate()
        fill(gate, rng, slope=0.8, steps=16)
        weights.append(gate.weight)
        estimates.append(gate.estimate)
    mean, se = np.mean(estimates), np.std(estimates, ddof=1) / 10
    assert abs(mean - 0.8) <= 4 * se  # the pooled slope is unbiased
    # min(lam_hat, 2 LCB) <= lam_hat, and with this much evidence it is lam_hat nearly always
    assert 0.95 * np.mean(estimates) < np.mean(weights) <= np.mean(estimates)


def test_weight_is_clipped_and_needs_two_groups() -> None:
    gate = WorldModelGate()
    f = np.linspace(-1, 1, 8)
    assert gate.update(5 * f, f, np.zeros(8)) == 0.0  # one group: no standard error
    rng = np.random.default_rng(2)
    fill(gate, rng, slope=5.0, steps=8)
    assert gate.weight == 1.0 and gate.estimate > 4


def test_old_evidence_decays_and_resumes_bit_identically() -> None:
    rng = np.random.default_rng(3)
    gate = WorldModelGate(decay=0.5)
    fill(gate, rng, slope=1.0, steps=4)
    assert gate.weight > 0
    state = pickle.loads(pickle.dumps(gate.state_dict()))
    fill(gate, rng, slope=0.0, steps=12)  # the informative steps decay away
    assert gate.weight == pytest.approx(0.0, abs=0.3)
    twin = WorldModelGate(decay=0.5)
    twin.load_state_dict(state)
    rng_a, rng_b = np.random.default_rng(4), np.random.default_rng(4)
    fill(twin, rng_a, slope=0.5, steps=2)
    restored = WorldModelGate(decay=0.5)
    restored.load_state_dict(state)
    fill(restored, rng_b, slope=0.5, steps=2)
    assert (twin.weight, twin.estimate, twin.num_clusters) == (
        restored.weight,
        restored.estimate,
        restored.num_clusters,
    )


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="decay"):
        WorldModelGate(decay=0)
    with pytest.raises(ValueError, match="alpha"):
        WorldModelGate(alpha=0.7)


def test_the_pool_forgets_only_negligible_evidence() -> None:
    """Over 150 steps of 5 groups the pool holds the clusters of the last ``max_age`` steps
    only, and its statistics equal the whole run's (nothing dropped) up to the dropped weight
    (each dropped cluster holds < 1e-4 of its evidence)."""
    rng = np.random.default_rng(8)
    decay, groups = 0.8, np.repeat(np.arange(5), 4)
    gate = WorldModelGate(decay=decay, horizon=None)
    sxy, sxx = [], []
    for _ in range(150):
        f = rng.normal(size=20)
        r = 0.4 * f + rng.normal(size=20)
        gate.update(r, f, groups)
        fc, rc = (v.reshape(5, 4) - v.reshape(5, 4).mean(1, keepdims=True) for v in (f, r))
        sxy = [a * decay for a in sxy] + list((rc * fc).sum(1))
        sxx = [b * decay for b in sxx] + list((fc * fc).sum(1))
    whole = slope_bound(np.array(sxy), np.array(sxx), 0.05)
    oldest = max(a for a in range(100) if decay**a >= 1e-4)  # 41 steps
    assert gate.num_clusters == 5 * (oldest + 1)
    assert gate.estimate == pytest.approx(whole.estimate[0], rel=1e-3)
    assert gate.standard_error == pytest.approx(whole.standard_error[0], rel=1e-3)
    assert gate.dof == pytest.approx(whole.dof[0], rel=1e-2)
    assert gate.weight == pytest.approx(whole.weight[0], rel=1e-3)


def test_a_recurring_task_outlives_forgetting_and_a_gone_one_is_dropped() -> None:
    rng = np.random.default_rng(9)
    gate = WorldModelGate(decay=0.5, horizon=None)  # forgotten after 14 steps without growth
    for step in range(40):
        f = rng.normal(size=16)
        labels = np.repeat(["a", "b" if step < 10 else "c"], 8)
        gate.update(f + rng.normal(size=16), f, GROUPS, clusters=labels)
    assert gate.num_clusters == 2  # "a" and "c"; "b" last grew 30 steps ago
    state = pickle.loads(pickle.dumps(gate.state_dict()))
    twin = WorldModelGate(decay=0.5, horizon=None)
    twin.load_state_dict(state)
    f = rng.normal(size=16)
    labels = np.repeat(["b", "c"], 8)
    assert gate.update(f, f, GROUPS, clusters=labels) == twin.update(f, f, GROUPS, labels)
    assert gate.num_clusters == twin.num_clusters == 3


def test_a_step_costs_the_same_late_in_a_run() -> None:
    """400 groups a step, each its own cluster: the pool grows to ~72,000 clusters. The gate
    found a cluster by a linear search and appended one at a time: its step cost grew with
    the run (about 20x from step 10 to step 100). CPU time, medians of 5 steps."""
    rng = np.random.default_rng(10)
    groups = np.repeat(np.arange(400), 8)
    gate = WorldModelGate()
    cpu = []
    for _ in range(100):
        f = rng.normal(size=groups.size)
        r = 0.5 * f + rng.normal(size=groups.size)
        start = time.process_time()
        gate.update(r, f, groups)
        cpu.append(time.process_time() - start)
    early, late = np.median(cpu[5:10]), np.median(cpu[-5:])
    assert gate.num_clusters == 400 * 100
    assert late <= 3 * early + 0.005, (early, late)


def test_without_new_evidence_the_weight_fades_to_zero() -> None:
    rng = np.random.default_rng(11)
    gate = WorldModelGate(horizon=10)
    fill(gate, rng, slope=1.0, steps=12)
    held = gate.weight
    assert held > 0.5
    faded = [gate.update(np.empty(0), np.empty(0), np.empty(0)) for _ in range(12)]
    # the decay scales every cluster alike: the bound's weight holds, the fade takes it down
    np.testing.assert_allclose(faded[:4], held * np.array([0.9, 0.8, 0.7, 0.6]), rtol=1e-9)
    assert faded[9:] == [0.0, 0.0, 0.0]
    state = pickle.loads(pickle.dumps(gate.state_dict()))
    fill(gate, rng, slope=1.0, steps=1)  # new evidence: the bound's weight is back
    assert gate.weight == gate.bound_weight > 0.5
    twin = WorldModelGate(horizon=10)
    twin.load_state_dict(state)
    assert twin.weight == 0.0 and twin.stale == 12
    holding = WorldModelGate(horizon=None)
    fill(holding, rng, slope=1.0, steps=12)
    before = holding.weight
    for _ in range(30):
        holding.update(np.empty(0), np.empty(0), np.empty(0))
    assert holding.weight == pytest.approx(before)
    with pytest.raises(ValueError, match="horizon"):
        WorldModelGate(horizon=0)
