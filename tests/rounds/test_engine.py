"""The anchored-round engine on its own: what a plan executes and with which probability,
how results fold into the real record, and what a finished round reports."""

from __future__ import annotations

import math

import numpy as np
import pytest

from wmrl_env.executors.base import ExecResult, ExecStatus
from wmrl_env.fusion import RewardFusion
from wmrl_env.rounds import (
    ROUND_METRICS,
    AnchoredRound,
    AnchorSelection,
    InfrastructureFailureError,
    RealRecord,
    known_outcomes,
)
from wmrl_env.world_models.base import Prediction

IDS = np.repeat(np.arange(4), 3)


def prediction(invalid=(), std=True) -> Prediction:
    scores = np.linspace(0.1, 0.9, IDS.size)
    scores[list(invalid)] = np.nan
    return Prediction(
        scores, std=np.full(IDS.size, 0.1) if std else None, valid=np.isfinite(scores)
    )


def ok(score: float) -> ExecResult:
    return ExecResult("j", ExecStatus.OK, score=score)


def test_a_group_with_an_invalid_prediction_is_forced_unless_that_outcome_is_known() -> None:
    engine = AnchoredRound(
        RewardFusion(method="ppi", anchor_fraction=0.25, seed=0), failure_score=0.0
    )
    known = np.zeros(IDS.size, dtype=bool)
    known[7] = True  # group 2: its invalid member is known to fail
    drawn = engine.draw(IDS)
    plan = engine.plan(IDS, prediction(invalid=(4, 7)), known, drawn=drawn)
    group1, group2 = IDS == 1, IDS == 2
    assert plan.anchors[group1].all() and (plan.inclusion[group1] == 1.0).all()
    assert plan.execute[group1].all()
    assert not plan.execute[7]
    if not drawn[group2].any():  # not forced by a known member's invalid prediction
        assert not plan.anchors[group2].any() and not plan.execute[group2].any()
    assert plan.n_forced_groups == int(not drawn[group1].any())
    np.testing.assert_allclose(plan.inclusion[drawn & ~group1], 0.25)


def test_screening_spends_its_budget_on_unknown_members_only() -> None:
    engine = AnchoredRound(
        RewardFusion(method="ppi", anchor_fraction=1.0, seed=1),
        failure_score=0.0,
        selection=AnchorSelection(execute_per_group=1, rng=np.random.default_rng(2)),
    )
    known = np.zeros(IDS.size, dtype=bool)
    known[[6, 9]] = True  # unparseable programs: known failures, predicted NaN
    plan = engine.plan(IDS, prediction(invalid=(6, 9)), known)
    assert not (plan.execute & known).any()
    per_group = np.bincount(IDS, plan.execute)
    assert per_group.tolist() == [1, 1, 1, 1]
    assert plan.screened.sum() == IDS.size - 4 - 2
    executed = plan.execute
    # each member's probability of execution: its group's 1 times its own given the group
    assert np.isclose(plan.inclusion[~known].reshape(-1).sum(), 4.0)
    assert (plan.inclusion[executed] > 0).all()


def test_top_screening_with_ppi_and_uncertainty_without_a_std_are_refused() -> None:
    with pytest.raises(ValueError, match="screening='top' cannot be used with method 'ppi'"):
        AnchoredRound(
            RewardFusion(method="ppi"),
            selection=AnchorSelection(execute_per_group=1, screening="top"),
        )
    with pytest.raises(ValueError, match="execute_per_group=1 cannot be used with method 'wmrl'"):
        AnchoredRound(RewardFusion(), selection=AnchorSelection(execute_per_group=1))
    for fusion in (RewardFusion(wm_gate="off"), RewardFusion(method="debias"),
                   RewardFusion(method="ppi")):  # fmt: skip
        AnchoredRound(fusion, selection=AnchorSelection(execute_per_group=1))
    engine = AnchoredRound(RewardFusion(), selection=AnchorSelection(priority="uncertainty"))
    with pytest.raises(ValueError, match="needs a world model that returns a std"):
        engine.plan(IDS, prediction(std=False))
    with pytest.raises(ValueError, match="anchor_priority must be one of"):
        AnchorSelection(priority="best")
    with pytest.raises(ValueError, match="execute_per_group must be an int >= 1"):
        AnchorSelection(execute_per_group=0)


def test_a_late_force_anchors_a_group_with_certainty() -> None:
    engine = AnchoredRound(RewardFusion(method="ppi", anchor_fraction=0.25, seed=3))
    drawn = engine.draw(IDS)
    plan = engine.plan(IDS, None, drawn=drawn)
    assert not plan.forced.any()
    target = 0 if not drawn[IDS == 0].any() else 3
    late = engine.force(plan, (target == IDS) & (np.arange(IDS.size) % 3 == 0))
    assert late.execute[target == IDS].all() and (late.inclusion[target == IDS] == 1).all()
    assert late.n_forced_groups == 1


def test_the_real_record_folds_outcomes_and_trips_the_breaker() -> None:
    engine = AnchoredRound(RewardFusion(), failure_score=0.0, max_infrastructure_failures=2)
    record = engine.record(4)
    record.add_all(
        [0, 1, 2],
        [ok(0.7), ExecResult("j", ExecStatus.OK), ExecResult("j", ExecStatus.CRASHED)],
    )
    assert record.score[:3].tolist() == [0.7, 0.0, 0.0]  # no finite score: invalid output
    assert record.program_failed[:3].tolist() == [False, True, True]
    record.add(3, ExecResult("j", ExecStatus.ERROR, message="daemon down"))
    assert record.failed[3] and math.isnan(record.score[3])
    with pytest.raises(InfrastructureFailureError, match="2 real executions in a row"):
        engine.record(2).add_all([0, 1], [ExecResult("j", ExecStatus.ERROR)] * 2)
    steps = RealRecord(1)
    meta = {"rewards": (0.5, 0.25)}
    steps.add_all([0, 0], [ExecResult("a", ExecStatus.OK, score=9.0, metadata=meta)] * 2)
    assert steps.score[0] == 1.5  # a gym job's per-step rewards add up, its score aside


def test_a_finished_round_reports_the_round_metrics() -> None:
    known, status = known_outcomes(lambda i: i == 5, list(range(IDS.size)))
    with pytest.raises(ValueError, match="known outcomes need a failure_score"):
        AnchoredRound(RewardFusion()).plan(IDS, prediction(), known)
    fusion = RewardFusion(method="wmrl", anchor_fraction=0.5, seed=4)
    engine = AnchoredRound(fusion, failure_score=0.0)
    plan = engine.plan(IDS, prediction(invalid=(1,)), known, status)
    record = engine.record(IDS.size)
    todo = np.flatnonzero(plan.execute)
    results = [ok(0.5) for _ in todo]
    results[0] = ExecResult("j", ExecStatus.ERROR)
    record.add_all(todo, results)
    done = engine.finish(plan, record, prediction(invalid=(1,)), clusters=list(IDS))
    assert set(ROUND_METRICS) <= set(done.metrics)
    assert done.metrics["n_executed"] == todo.size
    assert done.metrics["n_infrastructure_failures"] == 1
    assert done.metrics["n_forced_anchor_groups"] == plan.n_forced_groups
    assert done.metrics["wm_valid_fraction"] == pytest.approx(11 / 12)
    assert done.metrics["n_known"] == 1 and done.fusion.rewards[5] == 0.0


def test_a_draw_made_outside_the_fusion_keeps_its_probabilities_and_forces_invalid_groups() -> None:
    from wmrl_env.testing.round_scenario import RecordingFusion

    fusion = RecordingFusion(method="ppi", anchor_fraction=0.5, seed=0)
    selection = AnchorSelection(execute_per_group=2, rng=np.random.default_rng(0))
    engine = AnchoredRound(fusion, failure_score=0.0, selection=selection)
    drawn = np.repeat([True, False, True, False], 3)
    pi = np.repeat([0.4, 0.3, 0.5, 0.6], 3)
    known = np.zeros(IDS.size, dtype=bool)
    known[8] = True  # never executed, never screened
    plan = engine.plan(IDS, prediction(invalid=[4]), known, drawn=drawn, inclusion=pi)
    assert plan.decided_outside
    np.testing.assert_array_equal(plan.execute[3:6], True)  # group 1: forced, whole
    np.testing.assert_array_equal(plan.inclusion[3:6], 1.0)
    assert plan.execute[:3].sum() == 2 and plan.execute[6:8].sum() == 2 and not plan.execute[8]
    screened = plan.screened
    assert screened[:3].sum() == 1 and not screened[6:9].any() and not screened[9:].any()
    # members of a drawn group: the group's pi times the member's (2 of 3 by pps: in (0, 1])
    assert ((plan.inclusion[:3] > 0) & (plan.inclusion[:3] < 0.4 + 1e-12)).all()
    np.testing.assert_array_equal(plan.inclusion[9:], 0.0)
    record = engine.record(IDS.size)
    todo = np.flatnonzero(plan.execute)
    record.add_all(todo, [ok(0.5) for _ in todo])
    engine.finish(plan, record, prediction(invalid=[4]), clusters=IDS)
    (call,) = fusion.calls
    np.testing.assert_array_equal(call["inclusion_probabilities"], plan.inclusion)
    np.testing.assert_array_equal(call["screened"], screened)
    assert call["known_scores"][8] == 0.0
    with pytest.raises(ValueError, match="need the draw"):
        engine.plan(IDS, prediction(), inclusion=pi)
    with pytest.raises(ValueError, match=r"\(0, 1\]"):
        engine.plan(IDS, prediction(), drawn=drawn, inclusion=np.zeros(IDS.size))


def test_a_plan_decided_sample_by_sample_fuses_with_its_own_probabilities() -> None:
    from wmrl_env.testing.round_scenario import RecordingFusion

    fusion = RecordingFusion(method="ppi", anchor_fraction=0.25, seed=0)
    engine = AnchoredRound(fusion, failure_score=0.0)
    drawn = np.repeat([True, False, False, False], 3)
    executed = drawn.copy()
    executed[2] = False  # a known failure of the drawn group: never executed
    known_scores = np.full(IDS.size, np.nan)
    known_scores[[2, 5]] = [0.0, 0.7]  # 5: executed alone (its prediction was invalid)
    pi = np.where(drawn, 0.25, 0.0)
    pi[1] = 1.0  # its prediction was invalid: executed whether drawn or not
    plan = engine.plan_from(IDS, drawn, executed, pi, known_scores)
    assert plan.known.tolist() == np.isfinite(known_scores).tolist()
    assert not plan.screened.any() and plan.n_forced_groups == 0
    score = np.where(executed, 0.9, np.nan)
    ran = executed.copy()
    ran[5] = True
    record = RealRecord.of(score, np.zeros(IDS.size, bool), np.zeros(IDS.size, bool), ran)
    assert record.status[5] == "ok" and record.status[3] == "not_executed"
    finished = engine.finish(plan, record, prediction(invalid=[1, 5]), clusters=IDS)
    (call,) = fusion.calls
    np.testing.assert_array_equal(call["inclusion_probabilities"], pi)
    np.testing.assert_array_equal(call["known_scores"], known_scores, strict=False)
    assert finished.fusion.rewards[1] == 0.9  # the forced member: its real score, not r / pi
    assert finished.fusion.rewards[5] == 0.7 and finished.metrics["n_executed"] == 3
    with pytest.raises(ValueError, match="known outcome is marked executed"):
        engine.plan_from(IDS, drawn, drawn | np.isfinite(known_scores), pi, known_scores)
    with pytest.raises(ValueError, match=r"\(0, 1\]"):
        engine.plan_from(IDS, drawn, executed, np.zeros(IDS.size), known_scores)


def test_a_round_without_a_world_model_fuses_real_scores_only() -> None:
    engine = AnchoredRound(RewardFusion(method="real", seed=0))
    everyone = np.ones(IDS.size, dtype=bool)
    plan = engine.plan(IDS, None, drawn=everyone, inclusion=np.ones(IDS.size))
    record = engine.record(IDS.size)
    record.add_all(np.arange(IDS.size), [ok(float(i)) for i in range(IDS.size)])
    finished = engine.finish(plan, record, None)
    assert plan.execute.all() and finished.metrics["wm_valid_fraction"] == 1.0
    np.testing.assert_allclose(finished.fusion.rewards, np.arange(IDS.size))
