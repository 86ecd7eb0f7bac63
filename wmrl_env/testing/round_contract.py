"""The shared conformance tests for every integration that plays anchored rounds (the vector
env, TRL's reward, verl's reward manager and estimator, ...).

Every adapter plays the same small scenario (:class:`RoundScenario`): four tasks, groups of
three, one sample whose world-model prediction is invalid and one known to fail without
running. The suite checks, against the adapter's own code path:

* over the anchor draw, ``ppi``'s fused reward of every kind of sample has the sample's real
  outcome as its expectation (normal samples, the invalid prediction, its group's other
  members, the known failure), by Monte Carlo with a tolerance from the Monte-Carlo error;
* a known failure is never executed;
* the circuit breaker raises :class:`~wmrl_env.rounds.InfrastructureFailureError` once the
  configured number of infrastructure failures in a row is reached;
* the fusion's gate receives the groups' tasks (``clusters``, the same label for a task
  recurring across rounds) and the world model's std.

Subclass :class:`AnchoredRoundContract` with a ``Test`` prefix and implement its hooks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from wmrl_env.executors.base import ExecResult, ExecStatus
from wmrl_env.fusion import FusionOutput, RewardFusion
from wmrl_env.rounds import InfrastructureFailureError

__all__ = [
    "SCENARIO",
    "AnchoredRoundContract",
    "PlayedRound",
    "RecordingFusion",
    "RoundScenario",
    "ScenarioExecutor",
    "ScenarioWorldModel",
    "check_unbiased",
]

KINDS = ("normal", "invalid", "invalid_sibling", "known_failure")


@dataclass(frozen=True)
class RoundScenario:
    """Tasks ``0..3`` (a group each), actions ``0..3``; member ``i`` of a group plays action
    ``i``, except in task 2, whose first member plays action 3, a program known to fail
    (:meth:`is_known_failure`; executed, it would crash). The world model's prediction of
    action 1 in task 1 is invalid (NaN)."""

    real_table: np.ndarray = field(
        default_factory=lambda: np.array(
            [[0.8, 0.2, 0.5], [0.6, 0.9, 0.1], [0.3, 0.7, 0.4], [1.0, 0.0, 0.5]]
        )
    )
    invalid: tuple[int, int] = (1, 1)
    known_failure_action: int = 3
    failure_score: float = 0.0
    anchor_fraction: float = 0.25
    group_size: int = 3

    @property
    def num_tasks(self) -> int:
        return int(self.real_table.shape[0])

    def actions(self, task: int) -> list[int]:
        """The actions a group of ``task`` plays."""
        actions = list(range(self.group_size))
        if task == 2:
            actions[0] = self.known_failure_action
        return actions

    def is_known_failure(self, action: Any) -> bool:
        return int(action) == self.known_failure_action

    def real(self, task: int, action: int) -> float:
        """The real outcome (the failure score for the known failure)."""
        if self.is_known_failure(action):
            return self.failure_score
        return float(self.real_table[task, action])

    def prediction(self, task: int, action: int) -> tuple[float, float]:
        """``(score, std)``: a biased, noisy reading of the real score; NaN where invalid."""
        if (task, action) == self.invalid:
            return math.nan, 0.1
        if self.is_known_failure(action):
            return 0.5, 0.3
        real = float(self.real_table[task, action])
        return 0.2 + 0.6 * real + 0.05 * (task - action), 0.05 + 0.05 * action

    def kind(self, task: int, action: int) -> str:
        if self.is_known_failure(action):
            return "known_failure"
        if (task, action) == self.invalid:
            return "invalid"
        return "invalid_sibling" if task == self.invalid[0] else "normal"


SCENARIO = RoundScenario()


class ScenarioWorldModel:
    """The scenario's world model: ``predict(contexts, artifacts)`` with a task and an action
    read from each (``int()`` of them, or the last integer in their text)."""

    def __init__(self, scenario: RoundScenario = SCENARIO) -> None:
        self.scenario = scenario

    def predict(self, contexts: Sequence[Any], artifacts: Sequence[Any]) -> tuple[Any, Any]:
        pairs = [
            self.scenario.prediction(_number(c), _number(a))
            for c, a in zip(contexts, artifacts, strict=True)
        ]
        return np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])


class ScenarioExecutor:
    """Runs ``(task, action)`` jobs: the scenario's real outcome (a crash for the known
    failure); ``broken=True``: every job fails in the infrastructure. Counts what it ran."""

    def __init__(self, scenario: RoundScenario = SCENARIO, broken: bool = False) -> None:
        self.scenario = scenario
        self.broken = broken
        self.executed: list[tuple[int, int]] = []

    def _result(self, job: Any) -> ExecResult:
        task, action = (int(v) for v in job)
        self.executed.append((task, action))
        if self.broken:
            return ExecResult("job", ExecStatus.ERROR, message="the sandbox daemon is down")
        if self.scenario.is_known_failure(action):
            return ExecResult("job", ExecStatus.CRASHED, message="SyntaxError")
        return ExecResult("job", ExecStatus.OK, score=self.scenario.real(task, action))

    def submit(self, jobs: Sequence[Any]) -> list[Future[ExecResult]]:
        futures = []
        for job in jobs:
            future: Future[ExecResult] = Future()
            future.set_result(self._result(job))
            futures.append(future)
        return futures

    def run(self, jobs: Sequence[Any]) -> list[ExecResult]:
        return [future.result() for future in self.submit(jobs)]

    def close(self) -> None:
        pass


class RecordingFusion(RewardFusion):
    """A :class:`RewardFusion` that keeps the arguments and output of every ``step``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[dict[str, Any]] = []

    def step(self, group_ids: Any, *args: Any, **kwargs: Any) -> FusionOutput:
        out = super().step(group_ids, *args, **kwargs)
        self.calls.append({"group_ids": np.asarray(group_ids), "out": out, **kwargs})
        return out


@dataclass(frozen=True)
class PlayedRound:
    """One round as an adapter played it, per sample: the fused reward, the sample's real
    outcome and its kind (:meth:`RoundScenario.kind`)."""

    rewards: np.ndarray
    truth: np.ndarray
    kinds: Sequence[str]


def check_unbiased(rounds: Sequence[PlayedRound], z: float = 4.5) -> dict[str, tuple[float, float]]:
    """Per kind of sample, the mean over rounds of ``reward - truth`` (each round's mean over
    its samples of that kind) and its standard error; ``AssertionError`` where the mean is
    further than ``z`` standard errors from 0 (a kind with no spread must match exactly)."""
    found: dict[str, tuple[float, float]] = {}
    for kind in KINDS:
        per_round = []
        for played in rounds:
            mask = np.array([k == kind for k in played.kinds])
            if mask.any():
                per_round.append(float(np.mean(played.rewards[mask] - played.truth[mask])))
        if not per_round:
            continue
        errors = np.array(per_round)
        if not np.isfinite(errors).all():
            raise AssertionError(f"{kind}: a fused reward is not finite")
        se = float(errors.std(ddof=1) / math.sqrt(errors.size)) if errors.size > 1 else 0.0
        found[kind] = (float(errors.mean()), se)
        assert abs(errors.mean()) <= z * se + 1e-9, (
            f"{kind} samples: E[reward - real] = {errors.mean():+.4f} +- {se:.4f} over "
            f"{errors.size} draws: PPI is biased for them"
        )
    return found


class AnchoredRoundContract:
    """Mixin: subclass with a ``Test`` prefix and implement the hooks below."""

    scenario: RoundScenario = SCENARIO
    draws: int = 1500

    def make_fusion(self, seed: int, method: str = "ppi") -> RecordingFusion:
        """The fusion the hooks must use (fresh per draw, so the draws are independent)."""
        return RecordingFusion(
            method=method, anchor_fraction=self.scenario.anchor_fraction, seed=seed
        )

    def play(self, fusion: RewardFusion, seed: int, executor: ScenarioExecutor) -> PlayedRound:
        """One round of the scenario, every task once, through the adapter, with ``fusion``
        and ``executor``; ``seed`` varies the anchor draw."""
        raise NotImplementedError

    def play_broken(self, limit: int, executor: ScenarioExecutor) -> None:
        """Rounds against ``executor`` (always an infrastructure failure) with the adapter's
        ``max_infrastructure_failures=limit``, until the adapter raises (at most 2 * limit
        real executions' worth of rounds)."""
        raise NotImplementedError

    def test_ppi_expected_reward_is_the_real_outcome_for_every_kind_of_sample(self) -> None:
        rounds = []
        executor = ScenarioExecutor(self.scenario)
        for seed in range(self.draws):
            rounds.append(self.play(self.make_fusion(seed), seed, executor))
        found = check_unbiased(rounds)
        assert set(found) == set(KINDS), f"the scenario's kinds were not all played: {found}"
        assert not any(self.scenario.is_known_failure(a) for _, a in executor.executed), (
            "a known failure was executed"
        )

    def test_the_breaker_trips_after_the_configured_infrastructure_failures(self) -> None:
        executor = ScenarioExecutor(self.scenario, broken=True)
        with pytest.raises(InfrastructureFailureError, match="3 real executions in a row"):
            self.play_broken(3, executor)
        assert 3 <= len(executor.executed) <= 3 + 2 * self.scenario.group_size * 4

    def test_clusters_and_std_reach_the_gate(self) -> None:
        fusion = self.make_fusion(0, method="wmrl")
        executor = ScenarioExecutor(self.scenario)
        for seed in range(2):
            self.play(fusion, seed, executor)
        assert len(fusion.calls) == 2
        labels = set()
        for call in fusion.calls:
            clusters, group_ids = call.get("clusters"), call["group_ids"]
            assert clusters is not None, "the fusion's gate got no clusters"
            clusters = list(clusters)
            for group in np.unique(group_ids):
                assert len({clusters[i] for i in np.flatnonzero(group_ids == group)}) == 1
            labels |= set(clusters)
            std = call.get("wm_std")
            assert std is not None, "the fusion's gate got no world-model std"
            valid = call.get("wm_valid")
            valid = np.ones(len(std), bool) if valid is None else np.asarray(valid)
            assert np.isfinite(np.asarray(std)[valid]).all() and (np.asarray(std) > 0).any()
        # the same four tasks in both rounds: four clusters, not one per (round, group)
        assert len(labels) == self.scenario.num_tasks


def _number(value: Any) -> int:
    if isinstance(value, (int, np.integer)):
        return int(value)
    digits = "".join(ch if ch.isdigit() else " " for ch in str(value)).split()
    if not digits:
        raise ValueError(f"no task or action number in {value!r}")
    return int(digits[-1])
