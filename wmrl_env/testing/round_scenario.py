"""The small scenario every adapter of the anchored round plays in the conformance suite
(:mod:`wmrl_env.testing.round_contract`): four tasks, groups of three, one sample whose
world-model prediction is invalid and one known to fail without running; its world model,
its executor, a fusion that records its calls, a played round and the Monte-Carlo check of
PPI's unbiasedness."""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from wmrl_env.executors.base import ExecResult, ExecStatus
from wmrl_env.fusion import FusionOutput, RewardFusion

__all__ = [
    "KINDS",
    "SCENARIO",
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


def _number(value: Any) -> int:
    if isinstance(value, (int, np.integer)):
        return int(value)
    digits = "".join(ch if ch.isdigit() else " " for ch in str(value)).split()
    if not digits:
        raise ValueError(f"no task or action number in {value!r}")
    return int(digits[-1])
