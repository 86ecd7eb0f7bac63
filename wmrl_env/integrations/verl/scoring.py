"""One training sample's round in a verl reward worker, without verl: the anchor draw of its
group, its execution (started before the world model answers), the circuit breaker, and the
:class:`~wmrl_env.integrations.verl.ledger.SampleRecord` filed for the advantage step.
:class:`~wmrl_env.integrations.verl.reward_manager.WMRLRewardManager` calls it per sample;
what each kind of sample becomes is :func:`~wmrl_env.rounds.sample_outcome`'s.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from wmrl_env.executors.base import ExecResult
from wmrl_env.integrations.verl.ledger import SampleRecord, anchor_draw
from wmrl_env.rounds import InfrastructureHealth, must_execute, sample_outcome

__all__ = ["SampleDraw", "sample_record", "score_sample"]


@dataclass(frozen=True)
class SampleDraw:
    """A sample before its world model answers: its group (``uid``), its own ``key``, the
    draw (``seed``, ``anchor_fraction``), whether it is known to fail and its task."""

    uid: str
    key: str
    seed: int
    anchor_fraction: float
    known_failure: bool = False
    cluster: str = ""

    @property
    def drawn(self) -> bool:
        return anchor_draw(self.uid, self.seed) < self.anchor_fraction


async def score_sample(
    sample: SampleDraw,
    predict: Callable[[], Awaitable[tuple[float, bool, float]]],
    submit: Callable[[], Awaitable[ExecResult]],
    health: InfrastructureHealth,
    failure_score: float,
) -> SampleRecord:
    """Play one sample: ``submit()`` starts its real execution (at once for a drawn group,
    so it runs while ``predict()`` answers ``(score, valid, std)``; after it when the
    prediction is invalid), ``health`` sees every result; returns its record."""
    drawn = sample.drawn
    pending = submit() if drawn and not sample.known_failure else None
    wm_score, wm_valid, wm_std = await predict()
    if pending is None and must_execute(drawn, wm_valid, sample.known_failure):
        pending = submit()  # no prediction: run it to know
    result = await pending if pending is not None else None
    if result is not None:
        health.record([result])
    return sample_record(sample, (wm_score, wm_valid, wm_std), result, failure_score)


def sample_record(
    sample: SampleDraw,
    prediction: tuple[float, bool, float],
    result: ExecResult | None,
    failure_score: float,
) -> SampleRecord:
    """The record of ``sample`` given its ``(score, valid, std)`` prediction and the
    execution :func:`~wmrl_env.rounds.must_execute` asked for (``None`` when none ran)."""
    wm_score, wm_valid, wm_std = prediction
    outcome = sample_outcome(
        sample.drawn,
        sample.anchor_fraction,
        wm_valid,
        sample.known_failure,
        result,
        failure_score,
        wm_score if wm_valid else math.nan,
    )
    return SampleRecord(
        uid=sample.uid,
        reward=outcome.reward,
        wm_score=float(wm_score) if wm_valid else math.nan,
        wm_valid=wm_valid,
        real_score=outcome.real_score,
        failed=outcome.failed,
        is_anchor=sample.drawn or outcome.is_anchor,  # a drawn group is anchored whole
        # a forced member's 1; elsewhere its group's draw
        inclusion_probability=outcome.inclusion_probability
        if outcome.is_anchor
        else float(sample.anchor_fraction),
        key=sample.key,
        known_score=outcome.known_score,
        wm_std=float(wm_std),
        cluster=sample.cluster,
        executed=result is not None,
        program_failed=result is not None and _program_failed(result),
    )


def _program_failed(result: ExecResult) -> bool:
    """The run failed by the program's fault: a program failure, or no finite score."""
    if result.status.is_infrastructure_failure:
        return False
    return not (result.ok and math.isfinite(result.score))
