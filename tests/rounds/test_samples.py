"""One sample's fate (:func:`wmrl_env.rounds.sample_outcome`) and the shared breaker."""

from __future__ import annotations

import math

import pytest

from wmrl_env.executors.base import ExecResult, ExecStatus
from wmrl_env.rounds import InfrastructureHealth, must_execute, sample_outcome, task_cluster

OK = ExecResult("a", ExecStatus.OK, score=0.6)
LOST = ExecResult("b", ExecStatus.ERROR, message="daemon down")


def test_each_kind_of_sample() -> None:
    normal = sample_outcome(True, 0.2, True, False, OK, 0.0, wm_score=0.4)
    assert (normal.is_anchor, normal.inclusion_probability, normal.reward) == (True, 0.2, 0.6)
    forced = sample_outcome(True, 0.2, False, False, OK, 0.0)
    assert (forced.is_anchor, forced.inclusion_probability, forced.real_score) == (True, 1.0, 0.6)
    alone = sample_outcome(False, 0.2, False, False, OK, 0.0)
    assert not alone.is_anchor and alone.known_score == alone.reward == 0.6
    known = sample_outcome(True, 0.2, True, True, None, -1.0)
    assert not known.is_anchor and known.known_score == known.reward == -1.0
    world = sample_outcome(False, 0.2, True, False, None, 0.0, wm_score=0.4)
    assert not world.is_anchor and world.reward == 0.4 and math.isnan(world.known_score)
    missing = sample_outcome(True, 0.2, True, False, LOST, 0.0, wm_score=0.4)
    assert missing.failed and math.isnan(missing.reward)
    lost_alone = sample_outcome(False, 0.2, False, False, LOST, 0.0)
    assert not lost_alone.is_anchor and math.isnan(lost_alone.known_score)


def test_what_is_executed_and_bad_calls() -> None:
    assert must_execute(True, True, False) and must_execute(False, False, False)
    assert not must_execute(False, True, False) and not must_execute(True, False, True)
    with pytest.raises(ValueError, match="must be executed"):
        sample_outcome(False, 0.2, False, False, None, 0.0)
    with pytest.raises(ValueError, match=r"in \(0, 1\]"):
        sample_outcome(True, 0.0, True, False, OK, 0.0)


def test_the_breaker_counts_a_streak_and_refuses_a_bad_limit() -> None:
    health = InfrastructureHealth(3)
    health.record([LOST, LOST, OK, LOST, LOST])
    assert health.streak == 2
    off = InfrastructureHealth(0)
    off.record([LOST] * 100)
    assert off.streak == 100
    for bad in (-1, 2.5, True):
        with pytest.raises(ValueError, match="max_infrastructure_failures"):
            InfrastructureHealth(bad)


def test_task_clusters_are_stable_labels() -> None:
    assert task_cluster({"b": 1, "a": 2}) == task_cluster({"a": 2, "b": 1})
    assert task_cluster(object) == task_cluster(object)
