"""Screening beside a shut gate, and known outcomes kept out of screening and priorities.

A partly executed group's unexecuted members sit at the executed members' real level: with
the gate shut (``lam = 0``) the world model's level for a task moves no advantage, and the
executed members' advantages are those of GRPO on the executed members alone.
"""

from __future__ import annotations

import numpy as np
import pytest

from wmrl_env.fusion import RewardFusion, screen_members, ucb_priorities, uncertainty_priorities
from wmrl_env.fusion.synthetic import SyntheticWorld

GROUPS, SIZE, KEEP = 16, 8, 3


def screened_step(offsets: np.ndarray, scaling: str, how: str = "pps"):
    """One step of a fresh ``wmrl`` fusion (gate shut) on one batch whose world-model scores
    carry a per-task level offset; half the groups anchored, ``KEEP`` of 8 executed."""
    world = SyntheticWorld(num_groups=GROUPS, group_size=SIZE, group_bias=0.0)
    b = world.sample(np.random.default_rng(0))
    wm = b.wm_scores + offsets[b.group_ids]
    fusion = RewardFusion(
        method="wmrl", anchor_fraction=0.5, seed=1, advantage_scaling=scaling, min_pairs=8
    )
    assert fusion.wm_weight == 0.0
    anchors = fusion.select_anchors(b.group_ids)
    chosen, member_pi = screen_members(
        b.group_ids, b.wm_scores, KEEP, np.random.default_rng(2), how=how
    )  # the same members whatever the offsets
    executed = fusion.screen_anchors(chosen & anchors, member_pi)
    out = fusion.step(b.group_ids, wm, np.where(executed, b.real_scores, np.nan))
    return b, anchors, executed, out


def anchors_only(b, executed: np.ndarray) -> np.ndarray:
    """GRPO on the executed members alone: each one's real score minus their group's mean."""
    mean = np.bincount(b.group_ids, np.where(executed, b.real_scores, 0.0), GROUPS)
    count = np.bincount(b.group_ids, executed, GROUPS)
    with np.errstate(invalid="ignore"):
        return np.where(executed, b.real_scores - (mean / count)[b.group_ids], 0.0)


@pytest.mark.parametrize("how", ["pps", "top"])
def test_a_shut_gate_moves_no_advantage_whatever_the_task_levels(how: str) -> None:
    rng = np.random.default_rng(3)
    outs = []
    for spread in (0.0, 0.5, 2.0):
        offsets = rng.normal(0.0, spread, GROUPS)
        b, anchors, executed, out = screened_step(offsets, "none", how)
        screened = anchors & ~executed
        assert screened.sum() == (SIZE - KEEP) * GROUPS // 2
        np.testing.assert_allclose(out.advantages[screened], 0.0, atol=1e-12)
        expected = anchors_only(b, executed) * out.weights
        np.testing.assert_allclose(out.advantages[executed], expected[executed], atol=1e-12)
        outs.append(out.advantages[anchors])
    np.testing.assert_allclose(outs[1], outs[0], atol=1e-12)
    np.testing.assert_allclose(outs[2], outs[0], atol=1e-12)


def test_under_the_batch_scale_the_executed_members_keep_their_anchors_only_order() -> None:
    """With one batch-level scale the executed members' advantages are the anchors-only ones
    times one positive number, and the screened members' are 0."""
    offsets = np.random.default_rng(4).normal(0.0, 1.0, GROUPS)
    b, anchors, executed, out = screened_step(offsets, "batch")
    ratio = out.advantages[executed] / anchors_only(b, executed)[executed]
    assert ratio.min() > 0
    np.testing.assert_allclose(ratio, ratio[0], rtol=1e-9)
    np.testing.assert_allclose(out.advantages[anchors & ~executed], 0.0, atol=1e-12)


def test_an_open_gate_places_the_screened_members_by_their_calibrated_difference() -> None:
    """``lam > 0``: a screened member sits at ``mean r + lam (f - mean f)`` over the executed
    members of its group, so its reward is the executed level plus the shrunk difference."""
    world = SyntheticWorld(num_groups=GROUPS, group_size=SIZE, real_noise=0.01)
    rng = np.random.default_rng(5)
    fusion = RewardFusion(method="wmrl", anchor_fraction=0.5, seed=1)
    for step in range(12):
        b = world.sample(rng, step)
        anchors = fusion.select_anchors(b.group_ids)
        chosen, member_pi = screen_members(b.group_ids, b.wm_scores, KEEP, rng)
        executed = fusion.screen_anchors(chosen & anchors, member_pi)
        lam = fusion.wm_weight
        out = fusion.step(b.group_ids, b.wm_scores, np.where(executed, b.real_scores, np.nan))
    assert lam > 0.3
    g = b.group_ids[executed][0]
    members, ran = b.group_ids == g, executed & (b.group_ids == g)
    level = b.real_scores[ran].mean() + lam * (out.calibrated - out.calibrated[ran].mean())
    np.testing.assert_allclose(out.rewards[members & ~ran], level[members & ~ran], rtol=1e-12)


def test_one_executed_member_a_group_leaves_wmrl_nothing_to_learn() -> None:
    """Why a round refuses ``execute_per_group=1`` under ``wmrl``: an accurate world model
    (real noise 0.01), 30 steps. With one executed member per anchor group the gate gains no
    evidence (a member centred on itself is 0), its weight stays 0 and every advantage is 0;
    with two it opens and the advantages move."""
    world = SyntheticWorld(num_groups=GROUPS, group_size=SIZE, real_noise=0.01)
    for keep in (1, 2):
        rng = np.random.default_rng(6)
        fusion = RewardFusion(method="wmrl", anchor_fraction=0.5, seed=1)
        moved = 0.0
        for step in range(30):
            b = world.sample(rng, step)
            anchors = fusion.select_anchors(b.group_ids)
            chosen, member_pi = screen_members(b.group_ids, b.wm_scores, keep, rng)
            executed = fusion.screen_anchors(chosen & anchors, member_pi)
            out = fusion.step(b.group_ids, b.wm_scores, np.where(executed, b.real_scores, np.nan))
            moved = max(moved, float(np.abs(out.advantages).max()))
        if keep == 1:
            assert fusion.wm_weight == 0.0 and moved < 1e-12
        else:
            assert fusion.wm_weight > 0.3 and moved > 0.1


def test_known_outcomes_do_not_spend_the_screening_budget() -> None:
    """Two anchor groups of 8, 2 executions asked per group, one unparseable program in each
    (an invalid prediction, its outcome known): 4 real executions, not 16 (a non-finite
    upper bound made its whole group execute)."""
    ids = np.repeat([0, 1], 8)
    upper = np.linspace(0.1, 0.9, 16)
    known = np.zeros(16, dtype=bool)
    known[[3, 12]] = True
    upper[known] = np.nan
    for how in ("top", "pps"):  # pps last: its draw is fused by ppi below
        executed, member_pi = screen_members(
            ids, upper, 2, np.random.default_rng(0), how=how, known=known
        )
        assert executed.sum() == 4 and not executed[known].any()
        assert (np.bincount(ids, executed) == 2).all()
        assert member_pi[known].tolist() == [1.0, 1.0]
        if how == "pps":
            np.testing.assert_allclose(np.bincount(ids, np.where(known, 0.0, member_pi)), 2.0)
    # the fusion: known members are neither executed nor screened out, and fuse as known
    fusion = RewardFusion(method="ppi", anchor_fraction=1.0, seed=0)
    fusion.select_anchors(ids)
    run = fusion.screen_anchors(executed, member_pi, known)
    assert run.tolist() == executed.tolist()
    real = np.where(run, upper, np.nan)
    out = fusion.step(
        ids,
        np.nan_to_num(upper),
        real,
        wm_valid=~known,
        known_scores=np.where(known, 0.0, np.nan),
    )
    assert out.rewards[known].tolist() == [0.0, 0.0]
    assert out.is_anchor.sum() == 4 + 2  # executed, and the known members of anchor groups


def test_a_group_of_known_outcomes_executes_nothing() -> None:
    ids = np.repeat([0, 1], 3)
    known = np.array([True, True, True, False, False, False])
    executed, member_pi = screen_members(
        ids, np.full(6, np.nan), 1, np.random.default_rng(0), known=known
    )
    assert executed.tolist() == [False] * 3 + [True] * 3  # group 1's NaN: executed whole
    fusion = RewardFusion(method="wmrl", anchor_fraction=1.0, seed=0)
    fusion.select_anchors(ids)
    assert fusion.screen_anchors(executed, member_pi, known).sum() == 3
    with pytest.raises(ValueError, match="known outcome is marked executed"):
        fusion.screen_anchors(np.ones(6, bool), np.ones(6), known)
    with pytest.raises(ValueError, match="known must be a bool mask"):
        screen_members(ids, np.ones(6), 1, np.random.default_rng(0), known=np.zeros(6))


def test_known_outcomes_leave_the_anchor_priorities() -> None:
    """An invalid prediction's std counts as the batch's largest (it must be executed); a
    known outcome's is left out: its group is not made a likelier anchor by it."""
    ids = np.repeat([0, 1, 2], 2)
    std = np.array([0.1, 0.1, 0.1, np.nan, 0.4, 0.4])
    known = np.array([False, False, False, True, True, True])
    plain = uncertainty_priorities(ids, std)
    assert plain[2] > plain[0]  # the NaN counted as 0.4
    left_out = uncertainty_priorities(ids, std, known=known)
    assert left_out[2] == pytest.approx(left_out[0]) and left_out[4] == 0.0
    scores = np.array([0.2, 0.3, 0.2, 5.0, 9.0, 9.0])
    assert ucb_priorities(ids, scores)[2] > 4  # the known 5.0 made group 1 the likeliest
    priorities = ucb_priorities(ids, scores, known=known)
    np.testing.assert_allclose(priorities, [0.1, 0.1, 0.0, 0.0, 0.0, 0.0], atol=1e-12)
