"""The shared conformance tests for every integration that plays anchored rounds (the vector
env, TRL's reward, verl's reward manager and estimator, ...).

Every adapter plays the same small scenario (:class:`RoundScenario`): four tasks, groups of
three, one sample whose world-model prediction is invalid and one known to fail without
running. The suite checks, against the adapter's own code path:

* over the anchor draw, ``ppi``'s fused reward of every kind of sample has the sample's real
  outcome as its expectation (normal samples, the invalid prediction, its group's other
  members, the known failure), by Monte Carlo with a tolerance from the Monte-Carlo error;
* with screening (``execute_per_group`` below the group size), the same for every sample,
  screened members included;
* a known failure is never executed, and screening never spends its budget on one (a group
  holding an unparseable program known to fail executes at most the asked number);
* with the gate shut, the world model's per-task level moves no member's advantage in a
  group without a known outcome: every advantage there is the same whatever the offsets,
  the executed members' are those of GRPO on the anchors alone (times one weight) and the
  others' 0 (in a world-model group holding a known outcome, the world model's level for
  the task still sets how far the known outcome sits from its siblings);
* the gate's weight falls to 0 within ``gate_horizon`` rounds without new evidence (every
  execution failing in the infrastructure);
* the circuit breaker raises :class:`~wmrl_env.rounds.InfrastructureFailureError` once the
  configured number of infrastructure failures in a row is reached;
* the fusion's gate receives the groups' tasks (``clusters``, the same label for a task
  recurring across rounds) and the world model's std;
* every adapter reports the round's metrics under the same names: the fusion's numeric ones
  and :data:`~wmrl_env.rounds.ROUND_METRICS`.

Subclass :class:`AnchoredRoundContract` with a ``Test`` prefix and implement its hooks; an
adapter without screening sets ``screens = False`` (its screening checks then skip, saying
so).
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
from wmrl_env.rounds import ROUND_METRICS, InfrastructureFailureError

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
    read from each (``int()`` of them, or the last integer in their text).

    ``offsets``: a level added to every prediction of task ``t`` (``offsets[t]``: a world
    model whose level is wrong per task); ``unparseable``: the known failure is predicted
    NaN, as a world model does for a program it cannot read."""

    def __init__(
        self,
        scenario: RoundScenario = SCENARIO,
        offsets: Sequence[float] | None = None,
        unparseable: bool = False,
    ) -> None:
        self.scenario = scenario
        self.offsets = np.zeros(scenario.num_tasks) if offsets is None else np.asarray(offsets)
        self.unparseable = unparseable

    def predict(self, contexts: Sequence[Any], artifacts: Sequence[Any]) -> tuple[Any, Any]:
        scores, stds = [], []
        for c, a in zip(contexts, artifacts, strict=True):
            task, action = _number(c), _number(a)
            score, std = self.scenario.prediction(task, action)
            if self.unparseable and self.scenario.is_known_failure(action):
                score = math.nan
            scores.append(score + float(self.offsets[task]))
            stds.append(std)
        return np.array(scores), np.array(stds)


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
        self.observed: list[dict[str, Any]] = []  # every observe_anchors, step's included

    def step(self, group_ids: Any, *args: Any, **kwargs: Any) -> FusionOutput:
        out = super().step(group_ids, *args, **kwargs)
        self.calls.append({"group_ids": np.asarray(group_ids), "out": out, **kwargs})
        return out

    def observe_anchors(self, wm_scores: Any, real_scores: Any, *args: Any, **kwargs: Any) -> Any:
        self.observed.append({"wm_scores": np.asarray(wm_scores), **kwargs})
        return super().observe_anchors(wm_scores, real_scores, *args, **kwargs)


@dataclass(frozen=True)
class PlayedRound:
    """One round as an adapter played it, per sample: the fused reward, the sample's real
    outcome and its kind (:meth:`RoundScenario.kind`); where the adapter gives them: each
    sample's ``(task, action)``, the fused advantage, whether it was executed, whether the
    fusion got its outcome as a known outcome (no evidence), and the round's metrics as the
    adapter reports them (names without the adapter's prefix)."""

    rewards: np.ndarray
    truth: np.ndarray
    kinds: Sequence[str]
    samples: Sequence[tuple[int, int]] = ()
    advantages: np.ndarray | None = None
    executed: np.ndarray | None = None
    known: np.ndarray | None = None
    metrics: dict[str, Any] = field(default_factory=dict)


def check_unbiased(
    rounds: Sequence[PlayedRound], z: float = 4.5, by: str = "kind"
) -> dict[Any, tuple[float, float]]:
    """Per kind of sample (``by="sample"``: per ``(task, action)``), the mean over rounds of
    ``reward - truth`` (each round's mean over its samples of that kind) and its standard
    error; ``AssertionError`` where the mean is further than ``z`` standard errors from 0 (a
    kind with no spread must match exactly)."""
    found: dict[Any, tuple[float, float]] = {}
    labels_of = (lambda p: p.kinds) if by == "kind" else (lambda p: list(p.samples))
    every = KINDS if by == "kind" else sorted({s for p in rounds for s in p.samples})
    for kind in every:
        per_round = []
        for played in rounds:
            mask = np.array([k == kind for k in labels_of(played)])
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
    screens: bool = True  # the adapter offers screening (execute_per_group)
    groups: bool = True  # the adapter plays groups (returns group-centred advantages)

    def make_fusion(self, seed: int, method: str = "ppi", **options: Any) -> RecordingFusion:
        """The fusion the hooks must use (fresh per draw, so the draws are independent);
        ``options`` go to :class:`RewardFusion`."""
        options.setdefault("anchor_fraction", self.scenario.anchor_fraction)
        return RecordingFusion(method=method, seed=seed, **options)

    def play(
        self,
        fusion: RewardFusion,
        seed: int,
        executor: ScenarioExecutor,
        *,
        world_model: ScenarioWorldModel | None = None,
        execute_per_group: int | None = None,
    ) -> PlayedRound:
        """One round of the scenario, every task once, through the adapter, with ``fusion``,
        ``executor`` and ``world_model`` (default ``ScenarioWorldModel(self.scenario)``);
        ``seed`` varies the anchor draw and the screening draw; ``execute_per_group``: the
        adapter's screening (``None``: whole groups)."""
        raise NotImplementedError

    def play_broken(self, limit: int, executor: ScenarioExecutor) -> None:
        """Rounds against ``executor`` (always an infrastructure failure) with the adapter's
        ``max_infrastructure_failures=limit``, until the adapter raises (at most 2 * limit
        real executions' worth of rounds)."""
        raise NotImplementedError

    def _needs_screening(self) -> None:
        if not self.screens:
            pytest.skip(f"{type(self).__name__}: the adapter has no screening")

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

    def test_ppi_expected_reward_of_a_screened_sample_is_its_real_outcome(self) -> None:
        self._needs_screening()
        keep = self.scenario.group_size - 1
        executor = ScenarioExecutor(self.scenario)
        rounds = [
            self.play(self.make_fusion(seed), seed, executor, execute_per_group=keep)
            for seed in range(self.draws)
        ]
        assert sum(p.metrics.get("n_screened", 0) for p in rounds) > 0, "nothing was screened"
        found = check_unbiased(rounds)
        assert set(found) == set(KINDS), f"the scenario's kinds were not all played: {found}"
        if all(p.samples for p in rounds):  # and sample by sample
            check_unbiased(rounds, by="sample")

    def test_screening_never_executes_a_known_outcome(self) -> None:
        self._needs_screening()
        s = self.scenario
        model = ScenarioWorldModel(s, unparseable=True)
        for seed in range(20):
            executor = ScenarioExecutor(s)
            fusion = self.make_fusion(seed, method="wmrl", anchor_fraction=0.5)
            played = self.play(fusion, seed, executor, world_model=model, execute_per_group=1)
            assert not any(s.is_known_failure(a) for _, a in executor.executed), (
                "screening executed a known failure"
            )
            # the group holding the unparseable known failure executes 1 member at most
            groups = sum(1 for task, _ in played.samples if task == 2) // s.group_size
            ran = sum(1 for task, _ in executor.executed if task == 2)
            assert ran <= max(groups, 1), f"{ran} executions in task 2's group, 1 was asked"

    def test_a_shut_gate_moves_no_advantage_whatever_the_world_models_task_levels(self) -> None:
        if not self.groups:
            pytest.skip(f"{type(self).__name__}: groups of one have no group advantages")
        s = self.scenario
        keep = s.group_size - 1 if self.screens else None
        rng = np.random.default_rng(7)
        for seed in range(6):
            played = []
            for spread in (0.0, 0.5, 2.0):
                model = ScenarioWorldModel(s, offsets=rng.normal(0.0, spread, s.num_tasks))
                fusion = self.make_fusion(
                    seed, method="wmrl", anchor_fraction=0.5, advantage_scaling="none"
                )
                assert fusion.wm_weight == 0.0
                executor = ScenarioExecutor(s)
                played.append(
                    self.play(fusion, seed, executor, world_model=model, execute_per_group=keep)
                )
            first = played[0]
            free = ~_groups_holding(first, s, np.asarray(first.known, dtype=bool))
            for other in played[1:]:
                assert list(other.samples) == list(first.samples)
                np.testing.assert_allclose(
                    other.advantages[free], first.advantages[free], atol=1e-9
                )
            _check_anchors_only(first, s)

    def test_the_gates_weight_falls_to_zero_without_new_evidence(self) -> None:
        horizon = 3
        fusion = self.make_fusion(
            0, method="wmrl", anchor_fraction=1.0, min_pairs=4, gate_horizon=horizon
        )
        executor = ScenarioExecutor(self.scenario)
        for seed in range(12):
            self.play(fusion, seed, executor)
        opened = fusion.wm_weight
        assert opened > 0.0, "the scenario's world model never opened the gate"
        broken = ScenarioExecutor(self.scenario, broken=True)
        weights = []
        for seed in range(horizon):
            self.play(fusion, 100 + seed, broken)
            weights.append(fusion.wm_weight)
        assert all(a >= b for a, b in zip([opened, *weights], weights, strict=False)), weights
        assert weights[-1] == 0.0, f"the gate's weight held at {weights} without evidence"

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

    def test_metrics_are_named_alike(self) -> None:
        fusion = self.make_fusion(0, method="wmrl")
        played = self.play(fusion, 0, ScenarioExecutor(self.scenario))
        steps = [call["out"].metrics for call in fusion.calls]  # where the adapter steps
        numeric = {
            name
            for metrics in steps[-1:]
            for name, value in metrics.items()
            if isinstance(value, int | float | np.integer | np.floating)
            and not isinstance(value, bool | np.bool_)
        }
        missing = sorted((numeric | set(ROUND_METRICS) | {"kappa"}) - set(played.metrics))
        assert not missing, f"metrics the adapter does not report: {missing}"


def _groups_holding(played: PlayedRound, scenario: RoundScenario, marked: np.ndarray) -> np.ndarray:
    """Per sample: its group holds a ``marked`` sample."""
    group = np.arange(len(played.kinds)) // scenario.group_size
    return np.isin(group, group[marked])


def _check_anchors_only(played: PlayedRound, scenario: RoundScenario) -> None:
    """With the gate shut, in a group without a known outcome or an invalid prediction: its
    executed members' advantages are GRPO's on the executed members alone (real score minus
    their mean) times one weight, every other member's 0."""
    group = np.arange(len(played.kinds)) // scenario.group_size
    invalid = np.array([k == "invalid" for k in played.kinds])
    skip = _groups_holding(played, scenario, np.asarray(played.known, dtype=bool) | invalid)
    executed = np.asarray(played.executed, dtype=bool)
    ratios = []
    for g in np.unique(group[~skip]):
        members = group == g
        ran = members & executed
        if not ran.any():
            np.testing.assert_allclose(played.advantages[members], 0.0, atol=1e-9)
            continue
        np.testing.assert_allclose(played.advantages[members & ~executed], 0.0, atol=1e-9)
        grpo = played.truth[ran] - played.truth[ran].mean()
        spread = np.abs(grpo) > 1e-9
        ratios.extend(played.advantages[ran][spread] / grpo[spread])
        np.testing.assert_allclose(played.advantages[ran][~spread], 0.0, atol=1e-9)
    if ratios:
        assert min(ratios) > 0
        np.testing.assert_allclose(ratios, ratios[0], rtol=1e-9)


def _number(value: Any) -> int:
    if isinstance(value, (int, np.integer)):
        return int(value)
    digits = "".join(ch if ch.isdigit() else " " for ch in str(value)).split()
    if not digits:
        raise ValueError(f"no task or action number in {value!r}")
    return int(digits[-1])
