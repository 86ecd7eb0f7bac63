"""Outcomes known without a drawn execution (``RewardFusion.step(known_scores=...)``).

A program that does not parse would certainly fail: its reward is the failure score, its
group stays a world-model group (before, an invalid prediction forced the whole group to
execute, ~40 % of groups in issue 28's code policy), and it is no evidence for the
calibration, ``kappa``, the gate or PPI's rectification.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest

from wmrl_env.fusion import RewardFusion
from wmrl_env.fusion.synthetic import SyntheticWorld

FAILURE = 0.0


def history(fusion: RewardFusion, world: SyntheticWorld, rng, steps: int = 10) -> None:
    for _ in range(steps):
        b = world.sample(rng)
        anchors = fusion.select_anchors(b.group_ids)
        fusion.step(b.group_ids, b.wm_scores, np.where(anchors, b.real_scores, np.nan))


def fuse_with_known(fusion, b, known, executed, **kwargs):
    """One step in which the members with a known outcome have no world-model prediction
    (an unparseable program) and are never executed."""
    valid = np.isnan(known)
    return fusion.step(
        b.group_ids,
        np.where(valid, b.wm_scores, np.nan),
        np.where(executed & valid, b.real_scores, np.nan),
        wm_valid=valid,
        known_scores=known,
        **kwargs,
    )


@pytest.mark.parametrize("method", ["wmrl", "ppi", "debias"])
def test_a_known_failure_keeps_its_group_unexecuted_and_below_its_mean(method: str) -> None:
    world = SyntheticWorld(num_groups=8, group_size=4)
    fusion = RewardFusion(method=method, anchor_fraction=0.25, min_pairs=8, seed=0)
    history(fusion, world, np.random.default_rng(0))
    b = world.sample(np.random.default_rng(1))
    anchors = fusion.select_anchors(b.group_ids)
    target = int(b.group_ids[~anchors][0])  # a world-model group
    member = int(np.flatnonzero(b.group_ids == target)[0])
    known = np.full(b.group_ids.size, np.nan)
    known[member] = FAILURE
    out = fuse_with_known(fusion, b, known, anchors)
    group = b.group_ids == target
    assert not out.is_anchor[group].any()  # not forced: nothing of the group was executed
    assert out.rewards[member] == FAILURE
    assert out.advantages[member] < 0 and out.advantages[member] == out.advantages[group].min()
    assert out.metrics["n_known"] == 1


def test_known_members_are_no_calibration_pairs_and_do_not_move_the_level() -> None:
    """In a drawn anchor group the known member is not executed, not a pair; in a wmrl
    world-model group the other members keep ``mean f + lam (f - mean f)`` over themselves."""
    world = SyntheticWorld(num_groups=4, group_size=4)
    b = world.sample(np.random.default_rng(2))
    known = np.full(16, np.nan)
    known[[0, 8]] = FAILURE  # group 0 (anchor) and group 2 (world model)
    real = np.where(b.group_ids == 0, b.real_scores, np.nan)
    real[0] = np.nan
    plain = RewardFusion(method="wmrl", anchor_fraction=0.25, min_pairs=2, seed=0)
    out_plain = plain.step(b.group_ids, b.wm_scores, np.where(b.group_ids == 0, 0.0, np.nan))
    fusion = RewardFusion(method="wmrl", anchor_fraction=0.25, min_pairs=2, seed=0)
    out = fusion.step(b.group_ids, b.wm_scores, real, known_scores=known)
    assert out_plain.metrics["n_pairs"] == 4
    assert out.metrics["n_pairs"] == 3  # the known member of the anchor group is no pair
    assert out.is_anchor[:4].all() and not out.is_anchor[4:].any()
    others = np.array([9, 10, 11])
    assert out.rewards[others].mean() == pytest.approx(out.calibrated[others].mean())
    assert out.rewards[0] == out.rewards[8] == FAILURE


def test_ppi_stays_exactly_unbiased_with_known_members() -> None:
    """Over every draw of 2 of 8 groups, each PPI reward averages to its real outcome — the
    known score for known members, which are never executed."""
    world = SyntheticWorld(num_groups=8, group_size=4, exploit_share=0.3, exploit_bonus=0.4)
    fusion = RewardFusion(method="ppi", anchor_fraction=0.25, min_pairs=8, seed=0)
    rng = np.random.default_rng(0)
    history(fusion, world, rng)
    assert fusion.wm_weight > 0
    state = fusion.state_dict()
    b = world.sample(rng)
    known = np.full(32, np.nan)
    known[[1, 6, 13, 30]] = FAILURE
    truth = np.where(np.isnan(known), b.real_scores, known)
    draws = []
    for subset in combinations(range(8), 2):
        fusion.load_state_dict(state)
        chosen = np.isin(b.group_ids, subset)
        out = fuse_with_known(fusion, b, known, chosen, inclusion_probabilities=np.full(32, 0.25))
        draws.append(out.rewards)
    np.testing.assert_allclose(np.mean(draws, axis=0), truth, atol=1e-12)


def test_a_drawn_group_whose_outcomes_are_all_known_needs_no_execution_under_ppi() -> None:
    fusion = RewardFusion(method="ppi", anchor_fraction=0.5, seed=0)
    ids = np.repeat([0, 1], 2)
    anchors = fusion.select_anchors(ids)
    known = np.where(anchors, FAILURE, np.nan)
    out = fusion.step(ids, np.full(4, 0.5), np.full(4, np.nan), known_scores=known)
    assert (out.rewards[anchors] == FAILURE).all()


def test_bad_known_scores() -> None:
    fusion = RewardFusion(method="wmrl", seed=0)
    ids = np.repeat([0, 1], 2)
    wm = np.full(4, 0.5)
    real = np.array([1.0, 0.0, np.nan, np.nan])
    with pytest.raises(ValueError, match="known score and a real score"):
        fusion.step(ids, wm, real, known_scores=np.array([0.0, np.nan, np.nan, np.nan]))
    with pytest.raises(ValueError, match="known_scores has inf"):
        fusion.step(ids, wm, real, known_scores=np.array([np.nan, np.nan, np.inf, np.nan]))
    with pytest.raises(ValueError, match="known_scores has shape"):
        fusion.step(ids, wm, real, known_scores=np.zeros(3))
    with pytest.raises(ValueError, match="was not executed"):  # invalid and not known
        fusion.step(
            ids,
            wm,
            real,
            wm_valid=np.array([True, True, True, False]),
            known_scores=np.array([np.nan, np.nan, 0.0, np.nan]),
        )


@pytest.mark.parametrize("method", ["wmrl", "ppi"])
def test_a_known_failure_in_a_screened_anchor_group(method: str) -> None:
    """Screening and known outcomes together: each member of an anchor group is executed,
    screened out or known. The known member is neither an executed anchor's pair nor
    screened; its reward is the failure score, below its group's executed members (and,
    under wmrl, below the screened-out one, scored at its group's level)."""
    ids = np.repeat([0, 1], 4)
    wm = np.array([0.6, 0.7, np.nan, 0.5, 0.4, 0.5, 0.6, 0.7])
    valid = ~np.isnan(wm)
    real = np.array([0.6, 0.8, np.nan, np.nan] + [np.nan] * 4)
    known = np.array([np.nan, np.nan, FAILURE, np.nan] + [np.nan] * 4)
    screened = np.array([False, False, False, True] + [False] * 4)
    fusion = RewardFusion(method=method, seed=0)
    out = fusion.step(ids, wm, real, wm_valid=valid, known_scores=known, screened=screened,
                      inclusion_probabilities=np.full(8, 0.25))  # fmt: skip
    assert out.metrics["n_known"] == 1
    assert not out.is_anchor[3] and out.is_anchor[:2].all()
    assert out.rewards[2] == FAILURE
    # ppi with a shut gate scores the screened-out member lam * f = 0, the failure score
    others = [0, 1, 3] if method == "wmrl" else [0, 1]
    assert out.advantages[2] < min(out.advantages[others])
    with pytest.raises(ValueError, match="screened=True"):  # the known member is no excuse
        fusion.step(ids, wm, real, wm_valid=valid, known_scores=known,
                    inclusion_probabilities=np.full(8, 0.25))  # fmt: skip
