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
  and :data:`~wmrl_env.rounds.ROUND_METRICS`, and ``n_forced_anchor_groups`` means the same
  in each (the groups run for real without being drawn, for an invalid prediction).

The scenario and its pieces: :mod:`wmrl_env.testing.round_scenario`. Subclass
:class:`AnchoredRoundContract` with a ``Test`` prefix and implement its hooks; an
adapter without screening sets ``screens = False``, one of groups of one ``groups = False``
(the checks that need them then skip, saying so).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from wmrl_env.fusion import RewardFusion
from wmrl_env.rounds import ROUND_METRICS, InfrastructureFailureError
from wmrl_env.testing.round_scenario import (
    KINDS,
    SCENARIO,
    PlayedRound,
    RecordingFusion,
    RoundScenario,
    ScenarioExecutor,
    ScenarioWorldModel,
    check_unbiased,
)

__all__ = ["AnchoredRoundContract"]


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
            fusion = self.make_fusion(seed, method="debias", anchor_fraction=0.5)
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

    def test_forced_groups_are_those_run_only_for_an_invalid_prediction(self) -> None:
        """``n_forced_anchor_groups`` counts the groups that ran for real without being drawn
        because they hold an invalid prediction whose outcome is not known: none when every
        group is drawn; else each group holding the scenario's invalid prediction counts
        when it is not drawn (``1 - anchor_fraction`` of the time)."""
        executor = ScenarioExecutor(self.scenario)
        played = self.play(self.make_fusion(0, anchor_fraction=1.0), 0, executor)
        assert played.metrics["n_forced_anchor_groups"] == 0, "every group was drawn"
        forced, holding = 0, 0
        for seed in range(40):
            played = self.play(self.make_fusion(seed), seed, executor)
            count = played.metrics["n_forced_anchor_groups"]
            groups = sum(kind == "invalid" for kind in played.kinds)  # one per group at most
            assert 0 <= count <= groups, f"{count} forced, {groups} hold an invalid prediction"
            forced, holding = forced + count, holding + groups
        # each such group counts with probability q = 1 - anchor_fraction; the draws within a
        # round are without replacement (no more spread than independent ones): 4 binomial sd
        q = 1.0 - self.scenario.anchor_fraction
        low = q * holding - 4.0 * math.sqrt(holding * q * (1.0 - q))
        assert low <= forced < holding, f"{forced} of {holding} groups forced, {q:.2f} expected"


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
