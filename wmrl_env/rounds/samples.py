"""One sample's fate in an anchored round decided sample by sample (verl scores each sample
alone, in several workers, with its group's draw fixed by its uid).

A sample is executed when its group is drawn or its world-model prediction is invalid, and
never when its outcome is known without running it (a program known to fail). What the
fusion receives must keep PPI exact over the draw, for every kind of sample:

* drawn, valid prediction: an anchor with its group's inclusion probability ``pi``;
* drawn, invalid prediction: executed whether drawn or not, so an anchor with
  ``pi = 1`` (a *forced* member: PPI gives it its real score, not ``r / pi``);
* not drawn, invalid prediction: executed alone; its outcome is a *known outcome* (its reward,
  no evidence), so its group stays a world-model group;
* a known failure: never executed, ``failure_score`` as a known outcome.

Over the draw each sample's expected reward is then its real outcome (for the first kind,
through PPI's ``1 / pi``; for the others, exactly). Giving the second kind ``r / pi`` made
its expected reward ``(2 - pi) r``.

Example:
    >>> from wmrl_env.executors.base import ExecResult, ExecStatus
    >>> ok = ExecResult("a", ExecStatus.OK, score=0.8)
    >>> drawn = sample_outcome(True, 0.25, False, False, ok, failure_score=0.0)
    >>> drawn.is_anchor, drawn.inclusion_probability, drawn.reward
    (True, 1.0, 0.8)
    >>> alone = sample_outcome(False, 0.25, False, False, ok, failure_score=0.0)
    >>> alone.is_anchor, alone.known_score, alone.reward
    (False, 0.8, 0.8)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from wmrl_env.executors.base import ExecResult, outcome_score

__all__ = ["SampleOutcome", "must_execute", "sample_outcome"]


@dataclass(frozen=True)
class SampleOutcome:
    """What the fusion is told about one sample (NaN where a value does not exist).

    Attributes:
        is_anchor: its real score is evidence (a drawn or forced execution).
        inclusion_probability: the chance it had to be executed (1 when forced).
        real_score: the drawn or forced execution's outcome.
        failed: that execution failed in the infrastructure (the outcome is missing).
        known_score: an outcome known without a drawn execution (a known failure, or one
            executed alone because its prediction was invalid).
        reward: the value to report for the sample before fusion (real, known, else the
            world model's score).
    """

    is_anchor: bool
    inclusion_probability: float
    real_score: float
    failed: bool
    known_score: float
    reward: float


def must_execute(drawn: bool, wm_valid: bool, known_failure: bool) -> bool:
    """Whether a sample runs for real: its group was drawn or its prediction is invalid, and
    its outcome is not known without running it."""
    return (drawn or not wm_valid) and not known_failure


def sample_outcome(
    drawn: bool,
    pi: float,
    wm_valid: bool,
    known_failure: bool,
    result: ExecResult | None,
    failure_score: float,
    wm_score: float = math.nan,
) -> SampleOutcome:
    """The fate of one sample (module docstring): ``drawn`` and ``pi`` are its group's draw,
    ``result`` the execution :func:`must_execute` asked for (``None`` when none ran)."""
    if not 0.0 < pi <= 1.0 and drawn:
        raise ValueError(f"a drawn group needs an inclusion probability in (0, 1], got {pi}")
    if result is None and must_execute(drawn, wm_valid, known_failure):
        raise ValueError("this sample must be executed: pass its result")
    if known_failure:
        score = float(failure_score)
        return SampleOutcome(False, math.nan, math.nan, False, score, score)
    real = math.nan if result is None else outcome_score(result, failure_score)
    missing = result is not None and math.isnan(real)
    if not drawn and not wm_valid:  # executed alone, with certainty: a known outcome
        return SampleOutcome(False, math.nan, math.nan, False, real, real)
    if drawn:
        forced = 1.0 if not wm_valid else float(pi)
        return SampleOutcome(True, forced, real, missing, math.nan, real)
    return SampleOutcome(False, math.nan, math.nan, False, math.nan, float(wm_score))
