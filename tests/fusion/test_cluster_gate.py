"""``gate_scope="cluster"``: one evidence gate per task, so a world model good on some tasks and
useless or wrong on others gets weight only where its own task's anchors support it.

Synthetic ground truth: per step every task has one anchor group of 8 pairs, the real centred
score ``slope_t * f + noise``; twelve tasks with slope +1 (the world model helps), two with
slope 0 (useless), two with slope -0.5 (wrong). Tolerances are Monte-Carlo errors over
independent runs (each run's share of steps is one draw), at ``Z`` standard errors.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from wmrl_env.fusion import RewardFusion, WorldModelGate
from wmrl_env.fusion.cluster_gate import ClusterGates

Z = 4.0  # standard errors allowed
SLOPES = np.r_[np.ones(12), 0.0, 0.0, -0.5, -0.5]
GOOD, USELESS, WRONG = SLOPES > 0, SLOPES == 0, SLOPES < 0
GROUP = 8
WARM_UP = 10  # steps before the shares are counted


def _step_pairs(rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    f = rng.normal(size=(SLOPES.size, GROUP))
    real = SLOPES[:, None] * f + 0.7 * rng.normal(size=f.shape)
    groups = np.repeat(np.arange(SLOPES.size), GROUP)
    return real.ravel(), f.ravel(), groups, groups.astype(object)


def _run(gate, steps: int, seed: int) -> np.ndarray:
    """Per step (after the warm-up), each task's weight: shape (steps - WARM_UP, tasks)."""
    rng = np.random.default_rng(seed)
    weights = []
    for step in range(steps):
        real, f, groups, clusters = _step_pairs(rng)
        if step >= WARM_UP:  # the weight this step uses: fixed before its pairs
            weights.append(np.broadcast_to(gate.weights_for(np.arange(SLOPES.size)), SLOPES.shape))
        gate.update(real, f, groups, clusters)
    return np.array(weights, dtype=float)


def _share_and_se(per_run: np.ndarray) -> tuple[float, float]:
    return float(per_run.mean()), float(per_run.std(ddof=1) / np.sqrt(per_run.size))


def test_the_pooled_gate_leaves_the_wrong_tasks_never_worse_range() -> None:
    """Pooled slope (12 - 1) / 16 = 0.69: the gate opens, and on the slope -0.5 tasks
    (never-worse range {0}) and the slope 0 ones any weight > 0 is outside their range."""
    runs = np.array([(_run(WorldModelGate(), 40, s)[:, ~GOOD] > 0).mean() for s in range(20)])
    share, se = _share_and_se(runs)
    assert share - Z * se > 0.5, (share, se)


def test_the_per_cluster_gate_stays_shut_where_the_world_model_is_useless_or_wrong() -> None:
    """Slope 0: weight > 0 in at most alpha = 0.05 of steps (the gate's promise), slope -0.5:
    never; and it opens on the slope +1 tasks once they have evidence."""
    runs = [_run(ClusterGates(), 40, seed) for seed in range(60)]
    useless = np.array([(w[:, USELESS] > 0).mean() for w in runs])
    wrong = np.array([(w[:, WRONG] > 0).mean() for w in runs])
    good = np.array([(w[:, GOOD] > 0).mean() for w in runs])
    share, se = _share_and_se(useless)
    assert share <= 0.05 + Z * max(se, np.sqrt(0.05 * 0.95 / useless.size)), (share, se)
    assert wrong.max() == 0.0
    share, se = _share_and_se(good)
    assert share - Z * se > 0.9, (share, se)


def test_a_steps_cost_follows_the_clusters_remembered_not_the_runs_length() -> None:
    """A new task label every step: the gates of tasks whose evidence is forgotten are
    dropped, so the number held stops growing (count, not time)."""
    gates, rng, held = ClusterGates(decay=0.8), np.random.default_rng(0), []
    for step in range(400):
        f = rng.normal(size=GROUP)
        gates.update(f + rng.normal(size=GROUP), f, np.zeros(GROUP, int), [f"task{step}"] * GROUP)
        held.append(gates.num_clusters)
    assert max(held[200:]) == max(held[100:200]) < 200
    assert gates.steps == 400


def _fusion(method: str = "ppi", **options) -> RewardFusion:
    return RewardFusion(method=method, anchor_fraction=0.25, gate_scope="cluster", **options)


def _batch(rng: np.random.Generator, num_groups: int = 8) -> tuple[np.ndarray, ...]:
    """Groups of 4, two groups per task; the world model tracks tasks 0-1 and not 2-3."""
    group_ids = np.repeat(np.arange(num_groups), 4)
    task = group_ids // 2
    real = rng.normal(size=group_ids.size) + task
    wm = np.where(task < 2, real + 0.2 * rng.normal(size=real.size), rng.normal(size=real.size))
    return group_ids, task.astype(object), real, wm


def test_ppi_stays_unbiased_over_the_draw_with_per_cluster_weights() -> None:
    """From one warmed-up state (the gate open on the tasks the world model tracks), the mean
    of each trajectory's reward over fresh anchor draws is its real reward."""
    rng = np.random.default_rng(3)
    fusion = _fusion(seed=0)
    for _ in range(30):
        group_ids, tasks, real, wm = _batch(rng)
        anchors = fusion.select_anchors(group_ids)
        fusion.step(group_ids, wm, np.where(anchors, real, np.nan), clusters=tasks)
    group_ids, tasks, real, wm = _batch(rng)
    lam = fusion.wm_weights(tasks)
    assert lam[tasks < 2].min() > 0 and lam[tasks >= 2].max() == 0.0
    state, draws = fusion.state_dict(), []
    for seed in range(4000):
        twin = _fusion()
        twin.load_state_dict(copy.deepcopy(state))
        twin.reseed(seed)
        anchors = twin.select_anchors(group_ids)
        out = twin.step(group_ids, wm, np.where(anchors, real, np.nan), clusters=tasks)
        draws.append(out.rewards)
    draws = np.array(draws)
    se = draws.std(axis=0, ddof=1) / np.sqrt(len(draws))
    assert np.all(np.abs(draws.mean(axis=0) - real) <= Z * se + 1e-12)


def test_the_state_round_trips_and_a_scope_mismatch_is_refused() -> None:
    rng = np.random.default_rng(5)
    fusion, batches = _fusion("wmrl", seed=2), [_batch(rng) for _ in range(12)]
    for group_ids, tasks, real, wm in batches[:8]:
        anchors = fusion.select_anchors(group_ids)
        fusion.step(group_ids, wm, np.where(anchors, real, np.nan), clusters=tasks)
    twin = _fusion("wmrl")
    twin.load_state_dict(copy.deepcopy(fusion.state_dict()))
    for group_ids, tasks, real, wm in batches[8:]:
        a, b = fusion.select_anchors(group_ids), twin.select_anchors(group_ids)
        out = fusion.step(group_ids, wm, np.where(a, real, np.nan), clusters=tasks)
        same = twin.step(group_ids, wm, np.where(b, real, np.nan), clusters=tasks)
        np.testing.assert_array_equal(out.advantages, same.advantages)
        assert out.metrics["wm_weight"] == same.metrics["wm_weight"]
    with pytest.raises(ValueError, match="per-cluster gate"):
        RewardFusion(method="wmrl").load_state_dict(fusion.state_dict())
    with pytest.raises(ValueError, match="pooled gate"):
        _fusion("wmrl").load_state_dict(RewardFusion(method="wmrl").state_dict())


def test_a_step_without_clusters_or_a_bad_scope_is_refused() -> None:
    with pytest.raises(ValueError, match="gate_scope must be one of"):
        RewardFusion(gate_scope="task")
    fusion = _fusion("wmrl", seed=0)
    group_ids, _, real, wm = _batch(np.random.default_rng(0))
    anchors = fusion.select_anchors(group_ids)
    with pytest.raises(ValueError, match="needs clusters"):
        fusion.step(group_ids, wm, np.where(anchors, real, np.nan))
