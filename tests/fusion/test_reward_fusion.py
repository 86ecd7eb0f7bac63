"""RewardFusion: the public API, every method, edge cases, bad input, resume."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from wmrl_env.fusion import METHODS, RewardFusion
from wmrl_env.fusion.synthetic import SyntheticWorld

GROUP_IDS = np.repeat(np.arange(8), 4)


def batch(seed: int = 0, world: SyntheticWorld | None = None):
    world = world or SyntheticWorld(num_groups=8, group_size=4)
    return world.sample(np.random.default_rng(seed))


def observed(real: np.ndarray, anchors: np.ndarray) -> np.ndarray:
    return np.where(anchors, real, np.nan)


@pytest.mark.parametrize("method", METHODS)
def test_every_method_returns_consistent_shapes(method: str) -> None:
    fusion = RewardFusion(method=method, anchor_fraction=0.25, seed=0)
    b = batch()
    anchors = fusion.select_anchors(b.group_ids)
    out = fusion.step(b.group_ids, b.wm_scores, observed(b.real_scores, anchors))
    n = b.group_ids.size
    for name in ("rewards", "advantages", "weights", "calibrated", "is_anchor"):
        assert getattr(out, name).shape == (n,), name
    np.testing.assert_array_equal(out.is_anchor, anchors)
    assert np.all(out.weights > 0) and out.weights.mean() == pytest.approx(1.0)
    assert np.isfinite(out.advantages).all() and np.isfinite(out.kappa)
    assert {"n_pairs", "spearman", "residual_mse", "calibration_fallback"} <= out.metrics.keys()


def test_anchor_selection_is_whole_groups_and_seeded() -> None:
    a = RewardFusion(anchor_fraction=0.25, seed=3).select_anchors(GROUP_IDS)
    b = RewardFusion(anchor_fraction=0.25, seed=3).select_anchors(GROUP_IDS)
    np.testing.assert_array_equal(a, b)
    per_group = a.reshape(8, 4)
    assert np.all(per_group.all(axis=1) | ~per_group.any(axis=1))
    assert per_group.all(axis=1).sum() == 2


def test_real_and_wm_methods_select_all_and_none() -> None:
    assert RewardFusion(method="real").select_anchors(GROUP_IDS).all()
    assert not RewardFusion(method="wm").select_anchors(GROUP_IDS).any()


def test_min_anchor_groups_is_honoured() -> None:
    mask = RewardFusion(anchor_fraction=0.0, min_anchor_groups=2, seed=0).select_anchors(GROUP_IDS)
    assert mask.reshape(8, 4).all(axis=1).sum() == 2


def test_wmrl_rewards_are_real_on_anchors_and_calibrated_elsewhere() -> None:
    fusion = RewardFusion(method="wmrl", anchor_fraction=0.5, seed=0, wm_gate="off")
    b = batch()
    anchors = fusion.select_anchors(b.group_ids)
    out = fusion.step(b.group_ids, b.wm_scores, observed(b.real_scores, anchors))
    np.testing.assert_array_equal(out.rewards[anchors], b.real_scores[anchors])
    np.testing.assert_array_equal(out.rewards[~anchors], out.calibrated[~anchors])


def test_gated_wmrl_shrinks_world_model_groups_by_the_weight_of_earlier_steps() -> None:
    fusion = RewardFusion(method="wmrl", anchor_fraction=0.5, seed=0)
    world = SyntheticWorld(num_groups=8, group_size=4)
    rng = np.random.default_rng(0)
    for step in range(6):
        b = world.sample(rng)
        lam = fusion.wm_weight
        anchors = fusion.select_anchors(b.group_ids)
        out = fusion.step(b.group_ids, b.wm_scores, observed(b.real_scores, anchors))
        assert out.metrics["wm_weight"] == lam
        # world-model groups: mean_g f + lam (f - mean_g f), the shrunk prediction at the
        # calibrated level (issue 23, item 4: it was lam * f, near 0 while the gate is shut)
        level = np.repeat(out.calibrated.reshape(8, 4).mean(axis=1), 4)
        expected = level + lam * (out.calibrated - level)
        np.testing.assert_allclose(out.rewards[~anchors], expected[~anchors])
        assert (lam == 0.0) if step == 0 else (0.0 <= lam <= 1.0)  # no evidence at first
    assert fusion.wm_weight > 0.5  # a good world model earns its weight


def test_weighted_advantages_are_centred_and_carry_the_weights() -> None:
    fusion = RewardFusion(method="wmrl", anchor_fraction=0.25, seed=0, advantage_scaling="none")
    b = batch()
    anchors = fusion.select_anchors(b.group_ids)
    out = fusion.step(b.group_ids, b.wm_scores, observed(b.real_scores, anchors))
    centred = out.rewards - np.repeat(out.rewards.reshape(8, 4).mean(axis=1), 4)
    np.testing.assert_allclose(out.advantages, centred * out.weights)
    assert out.weights[anchors][0] == pytest.approx(out.kappa * out.weights[~anchors][0])


def test_failed_executions_leave_the_baseline_and_get_zero_advantage() -> None:
    fusion = RewardFusion(method="real", advantage_scaling="none")
    real = np.arange(32, dtype=float)
    failed = np.zeros(32, dtype=bool)
    failed[[1, 2]] = True
    real[failed] = np.nan
    out = fusion.step(GROUP_IDS, None, real, failed=failed)
    assert out.advantages[1] == 0 and out.advantages[2] == 0
    np.testing.assert_allclose(out.advantages[[0, 3]], [-1.5, 1.5])  # baseline of {0, 3}
    assert np.isnan(out.rewards[1]) and out.metrics["n_failed"] == 2


def test_all_equal_rewards_in_a_group_give_zero_advantages() -> None:
    real = np.repeat(np.arange(8, dtype=float), 4)
    out = RewardFusion(method="real").step(GROUP_IDS, None, real)
    np.testing.assert_array_equal(out.advantages, np.zeros(32))


def test_no_anchor_this_step_keeps_kappa_and_ages_the_window() -> None:
    fusion = RewardFusion(method="wmrl", anchor_fraction=0.5, seed=0)
    world = SyntheticWorld(num_groups=8, group_size=4)
    rng = np.random.default_rng(0)
    for _ in range(3):
        b = world.sample(rng)
        fusion.step(
            b.group_ids, b.wm_scores, observed(b.real_scores, fusion.select_anchors(b.group_ids))
        )
    before_kappa = fusion.kappa_estimator.kappa
    b = world.sample(rng)
    out = fusion.step(b.group_ids, b.wm_scores, np.full(32, np.nan))
    assert out.kappa == before_kappa and out.metrics["n_anchor_groups"] == 0
    assert np.isnan(out.metrics["anchor_gap"])


def test_failed_anchors_age_the_calibration_window() -> None:
    """Steps whose anchors all fail still count: after ``window`` of them no stale pair is
    left at full weight (the window used to age only on steps that brought pairs)."""
    fusion = RewardFusion(method="wmrl", anchor_fraction=0.5, seed=0, window=4)
    world = SyntheticWorld(num_groups=8, group_size=4)
    rng = np.random.default_rng(0)
    b = world.sample(rng)
    fusion.step(
        b.group_ids, b.wm_scores, observed(b.real_scores, fusion.select_anchors(b.group_ids))
    )
    probe = np.linspace(0.2, 1.0, 9)
    fitted = fusion.calibrator.transform(probe)
    assert len(fusion.calibrator.window_pairs()[0]) == 16
    for _ in range(4):
        b = world.sample(rng)
        anchors = fusion.select_anchors(b.group_ids)
        fusion.step(b.group_ids, b.wm_scores, np.full(32, np.nan), failed=anchors)
    assert len(fusion.calibrator.window_pairs()[0]) == 0
    np.testing.assert_allclose(fusion.calibrator.transform(probe), fitted)  # previous map


def test_zero_real_variance_keeps_previous_kappa() -> None:
    fusion = RewardFusion(method="wmrl", anchor_fraction=1.0, seed=0)
    real = np.repeat(np.linspace(0, 1, 8), 4)  # constant within every group
    wm = real + np.random.default_rng(0).normal(0, 0.1, size=32)
    out = fusion.step(GROUP_IDS, wm, real)
    assert out.kappa == 1.0 and np.isnan(out.metrics["kappa_raw"])


def test_single_anchor_group_and_one_member_groups() -> None:
    fusion = RewardFusion(method="wmrl", anchor_fraction=0.0, min_anchor_groups=1, seed=0)
    ids = np.arange(6)  # groups of one
    wm = np.linspace(0, 1, 6)
    anchors = fusion.select_anchors(ids)
    out = fusion.step(ids, wm, np.where(anchors, wm, np.nan))
    assert anchors.sum() == 1
    np.testing.assert_array_equal(out.advantages, np.zeros(6))  # nothing to compare within


def test_constant_world_model_scores_warn_and_use_identity() -> None:
    fusion = RewardFusion(method="wmrl", anchor_fraction=1.0, min_pairs=4)
    with pytest.warns(UserWarning, match="constant"):
        out = fusion.step(GROUP_IDS, np.full(32, 0.5), np.linspace(0, 1, 32))
    assert out.metrics["calibration_fallback"] == "identity"


def test_invalid_world_model_items_must_be_anchored_and_skip_calibration() -> None:
    fusion = RewardFusion(method="wmrl", anchor_fraction=0.25, seed=0)
    b = batch()
    anchors = fusion.select_anchors(b.group_ids)
    wm = b.wm_scores.copy()
    valid = np.ones(32, dtype=bool)
    first_anchor = int(np.flatnonzero(anchors)[0])
    wm[first_anchor], valid[first_anchor] = np.nan, False
    out = fusion.step(b.group_ids, wm, observed(b.real_scores, anchors), wm_valid=valid)
    assert np.isnan(out.calibrated[first_anchor])
    assert out.rewards[first_anchor] == b.real_scores[first_anchor]
    not_anchor = int(np.flatnonzero(~anchors)[0])
    valid = np.ones(32, dtype=bool)
    valid[not_anchor] = False
    with pytest.raises(ValueError, match="not executed"):
        fusion.step(b.group_ids, b.wm_scores, observed(b.real_scores, anchors), wm_valid=valid)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"group_ids": []}, "empty batch"),
        ({"wm_scores": np.zeros(31)}, "shape"),
        ({"wm_scores": np.r_[np.nan, np.zeros(31)]}, "NaN/inf"),
        ({"wm_scores": np.r_[np.inf, np.zeros(31)]}, "NaN/inf"),
        ({"real_scores": np.r_[0.5, np.full(31, np.nan)]}, "some members"),
        ({"real_scores": np.r_[np.inf, np.full(31, np.nan)]}, "inf"),
        ({"failed": np.ones(32)}, "bool"),
        ({"wm_scores": ["a"] * 32}, "numbers"),
    ],
)
def test_bad_input_raises_a_clear_value_error(kwargs, match) -> None:
    arguments = {
        "group_ids": GROUP_IDS,
        "wm_scores": np.zeros(32),
        "real_scores": np.full(32, np.nan),
    }
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=match):
        RewardFusion().step(**arguments)


def test_method_real_needs_every_group_and_failed_needs_nan() -> None:
    with pytest.raises(ValueError, match="every group"):
        RewardFusion(method="real").step(GROUP_IDS, None, np.r_[np.zeros(4), np.full(28, np.nan)])
    failed = np.zeros(32, dtype=bool)
    failed[0] = True
    with pytest.raises(ValueError, match="marked failed"):
        RewardFusion(method="real").step(GROUP_IDS, None, np.zeros(32), failed=failed)


def test_bad_constructor_arguments() -> None:
    with pytest.raises(ValueError, match="method"):
        RewardFusion(method="magic")
    with pytest.raises(ValueError, match="anchor_fraction"):
        RewardFusion(anchor_fraction=1.5)
    with pytest.raises(ValueError, match="advantage_scaling"):
        RewardFusion(advantage_scaling="per-token")


def test_ppi_needs_every_selected_group_executed() -> None:
    fusion = RewardFusion(method="ppi", anchor_fraction=0.25, seed=0)
    b = batch()
    fusion.select_anchors(b.group_ids)
    with pytest.raises(ValueError, match="selected"):
        fusion.step(b.group_ids, b.wm_scores, np.full(32, np.nan))


def test_forced_anchor_counts_as_certain_for_ppi() -> None:
    fusion = RewardFusion(method="ppi", anchor_fraction=0.25, seed=0, advantage_scaling="none")
    b = batch()
    anchors = fusion.select_anchors(b.group_ids)
    drawn_group = int(b.group_ids[np.flatnonzero(anchors)[0]])
    extra_group = int(b.group_ids[np.flatnonzero(~anchors)[0]])
    forced = fusion.force_anchors(np.isin(b.group_ids, [drawn_group, extra_group]))
    assert forced.sum() == anchors.sum() + 4
    pi = fusion.inclusion_probabilities
    assert (pi[np.isin(b.group_ids, [drawn_group, extra_group])] == 1.0).all()
    out = fusion.step(b.group_ids, b.wm_scores, observed(b.real_scores, forced))
    for group in (drawn_group, extra_group):  # pi = 1, drawn or not: the real score itself
        members = b.group_ids == group
        np.testing.assert_allclose(out.rewards[members], b.real_scores[members])
        assert (out.inclusion[members] == 1.0).all()
    assert fusion.inclusion_probabilities is None  # the step ended the round


def test_an_anchor_neither_drawn_nor_forced_is_refused() -> None:
    """One source of truth for pi: an executed group that the fusion did not record is an
    error, not silently ``pi = 1`` (and a drawn-and-forced group is 1, not its draw's pi)."""
    fusion = RewardFusion(method="wmrl", anchor_fraction=0.25, seed=0)
    b = batch()
    anchors = fusion.select_anchors(b.group_ids)
    extra = anchors | (b.group_ids == b.group_ids[np.flatnonzero(~anchors)[0]])
    with pytest.raises(ValueError, match="force_anchors"):
        fusion.step(b.group_ids, b.wm_scores, observed(b.real_scores, extra))
    with pytest.raises(ValueError, match="one source"):
        fusion.step(
            b.group_ids,
            b.wm_scores,
            observed(b.real_scores, anchors),
            inclusion_probabilities=np.full(32, 0.25),
        )
    with pytest.raises(ValueError, match="differ"):
        fusion.step(b.group_ids[::-1], b.wm_scores, observed(b.real_scores, anchors))
    fusion.step(b.group_ids, b.wm_scores, observed(b.real_scores, anchors))  # still fusable
    with pytest.raises(RuntimeError, match="select_anchors first"):
        fusion.force_anchors(anchors)


@pytest.mark.parametrize("method", METHODS)
def test_resume_from_state_dict_is_bit_identical(method: str) -> None:
    world = SyntheticWorld(num_groups=16, group_size=4)

    def steps(fusion, rng, n):
        outs = []
        for _ in range(n):
            b = world.sample(rng)
            anchors = fusion.select_anchors(b.group_ids)
            outs.append(fusion.step(b.group_ids, b.wm_scores, observed(b.real_scores, anchors)))
        return outs

    straight = RewardFusion(method=method, anchor_fraction=0.25, seed=5)
    rng = np.random.default_rng(9)
    expected = steps(straight, rng, 6)

    first = RewardFusion(method=method, anchor_fraction=0.25, seed=5)
    rng = np.random.default_rng(9)
    steps(first, rng, 3)
    state = pickle.loads(pickle.dumps(first.state_dict()))
    resumed = RewardFusion(method=method, anchor_fraction=0.25, seed=123)  # seed is overridden
    resumed.load_state_dict(state)
    for want, got in zip(expected[3:], steps(resumed, rng, 3), strict=True):
        np.testing.assert_array_equal(want.advantages, got.advantages)
        np.testing.assert_array_equal(want.calibrated, got.calibrated)
        assert want.kappa == got.kappa


def test_load_state_of_another_method_is_refused() -> None:
    with pytest.raises(ValueError, match="method"):
        RewardFusion(method="ppi").load_state_dict(RewardFusion(method="wmrl").state_dict())


def test_string_group_ids_work() -> None:
    ids = np.array(["task-a"] * 3 + ["task-b"] * 3)
    out = RewardFusion(method="real").step(ids, None, np.array([0, 1, 2, 5, 5, 8.0]))
    assert out.advantages[:3].sum() == pytest.approx(0) and out.advantages[
        3:
    ].sum() == pytest.approx(0)


@pytest.mark.parametrize("method", ["wmrl", "ppi"])
def test_resume_mid_round_is_bit_identical(method: str) -> None:
    """State saved between select_anchors/force_anchors and step (the round's record, the
    gate's and the monitor's windows) resumes bit-identically."""
    world = SyntheticWorld(num_groups=16, group_size=4, drift_per_step=0.01)
    rng = np.random.default_rng(1)
    batches = [world.sample(rng, step) for step in range(24)]
    straight = RewardFusion(method=method, anchor_fraction=0.25, seed=2)
    paused = RewardFusion(method=method, anchor_fraction=0.25, seed=2)
    for step, b in enumerate(batches):
        outs = []
        for fusion in (straight, paused):
            fusion.select_anchors(b.group_ids, np.repeat(np.arange(16.0), 4))
            anchors = fusion.force_anchors(b.group_ids == 0)
            if fusion is paused and step % 5 == 3:
                state = pickle.loads(pickle.dumps(fusion.state_dict()))
                fusion = paused = RewardFusion(method=method, anchor_fraction=0.25, seed=99)
                fusion.load_state_dict(state)
            outs.append(fusion.step(b.group_ids, b.wm_scores, observed(b.real_scores, anchors)))
        want, got = outs
        np.testing.assert_array_equal(want.advantages, got.advantages)
        np.testing.assert_array_equal(want.inclusion, got.inclusion)
        np.testing.assert_equal(want.metrics, got.metrics)  # NaN equals NaN here
    assert straight.gate.num_clusters > 0 and straight.wm_weight == paused.wm_weight


@pytest.mark.parametrize("method", ["wmrl", "ppi"])
def test_the_weight_falls_to_zero_when_the_anchors_stop_returning(method: str) -> None:
    """A dead sandbox: every anchor fails (no pair) for 25 steps. The world model's weight,
    earned before, falls to 0 over ``gate_horizon`` steps instead of holding."""
    world = SyntheticWorld(num_groups=16, group_size=8, real_noise=0.02)
    rng = np.random.default_rng(5)
    fusion = RewardFusion(method=method, anchor_fraction=0.25, seed=0, gate_horizon=8)
    for step in range(20):
        b = world.sample(rng, step)
        anchors = fusion.select_anchors(b.group_ids)
        fusion.step(b.group_ids, b.wm_scores, observed(b.real_scores, anchors))
    earned = fusion.wm_weight
    assert earned > 0.3
    used = []
    for step in range(20, 30):
        b = world.sample(rng, step)
        anchors = fusion.select_anchors(b.group_ids)
        out = fusion.step(b.group_ids, b.wm_scores, np.full(anchors.size, np.nan), failed=anchors)
        used.append(out.metrics["wm_weight"])
    assert used[0] == pytest.approx(earned)
    assert used[1] == pytest.approx(earned * 7 / 8, rel=0.02)
    assert used[-1] == fusion.wm_weight == 0.0
