"""The real side of an anchored round: each sample's real score, failure, status and
seconds, folded from its executions, with the circuit breaker told of every one."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np

from wmrl_env.executors.base import ExecResult
from wmrl_env.rounds.health import InfrastructureHealth

__all__ = ["NOT_EXECUTED", "RealRecord"]

NOT_EXECUTED = "not_executed"


class RealRecord:
    """Per sample: the real score so far, failure, status, message and seconds.

    A program failure (crash, timeout, out of memory, invalid output) is an outcome: the
    sample's real score is ``failure_score`` (``program_failed``). An infrastructure failure
    (``error``: the env raised, a worker died) is missing data: ``failed``, score NaN. With a
    NaN ``failure_score`` program failures are left out like infrastructure ones.

    A result that carries per-step ``rewards`` in its metadata (a gym env's job) adds their
    sum, so a multi-step episode played one job per step adds up its return; any other
    result adds its ``score`` (an ``ok`` result without a finite score is an invalid output,
    a program failure).

    Example:
        >>> from wmrl_env.executors.base import ExecStatus
        >>> record = RealRecord(3, failure_score=0.0)
        >>> record.add_all([0, 2], [ExecResult("a", ExecStatus.OK, score=0.7),
        ...                         ExecResult("b", ExecStatus.ERROR)])
        >>> record.score.tolist(), record.failed.tolist(), record.status.tolist()
        ([0.7, nan, nan], [False, False, True], ['ok', 'not_executed', 'error'])
    """

    def __init__(
        self,
        num_samples: int,
        failure_score: float = math.nan,
        health: InfrastructureHealth | None = None,
    ) -> None:
        self.failure_score = float(failure_score)
        self.health = health
        self.score = np.full(num_samples, np.nan)
        self.failed = np.zeros(num_samples, dtype=bool)
        self.program_failed = np.zeros(num_samples, dtype=bool)
        self.status = np.full(num_samples, NOT_EXECUTED, dtype="<U16")
        self.message = np.full(num_samples, "", dtype=object)
        self.seconds = np.zeros(num_samples)
        self.results: list[ExecResult] = []

    @classmethod
    def of(
        cls,
        score: np.ndarray,
        failed: np.ndarray,
        program_failed: np.ndarray,
        executed: np.ndarray,
    ) -> RealRecord:
        """A record of outcomes folded elsewhere (verl's reward workers file each sample's):
        per sample its real score, infrastructure failure, program failure and whether it
        ran; the statuses say ``ok``, ``error`` or ``failed``."""
        score = np.asarray(score, dtype=np.float64)
        record = cls(score.shape[0])
        record.score = score.copy()
        record.failed = np.asarray(failed, dtype=bool).copy()
        record.program_failed = np.asarray(program_failed, dtype=bool).copy()
        ran = np.asarray(executed, dtype=bool)
        outcome = np.where(record.failed, "error", np.where(record.program_failed, "failed", "ok"))
        record.status = np.where(ran, outcome, NOT_EXECUTED).astype("<U16")
        return record

    @property
    def executed(self) -> np.ndarray:
        """Per sample: at least one real execution finished."""
        return self.status != NOT_EXECUTED

    def add(self, index: int, result: ExecResult) -> None:
        """Fold in a real job played by sample ``index`` (one job per step in multi-step
        tasks)."""
        self.status[index] = result.status.value
        self.seconds[index] += result.exec_seconds
        if self.failed[index] or self.program_failed[index]:
            return
        has_rewards = "rewards" in result.metadata
        invalid = result.ok and not has_rewards and not math.isfinite(result.score)
        program_failure = result.status.is_program_failure or invalid
        if program_failure and not math.isnan(self.failure_score):
            self.program_failed[index] = True
            self.score[index] = self.failure_score
            self.message[index] = result.message
            return
        if not result.ok or invalid:
            if program_failure:
                warnings.warn(
                    f"a program failure ({result.status.value}) is left out of the rewards: "
                    "pass failure_score (or score_range) so that failures are scored as failures",
                    stacklevel=2,
                )
            self.failed[index] = True
            self.score[index] = np.nan
            self.message[index] = result.message
            return
        played = math.fsum(result.metadata["rewards"]) if has_rewards else result.score
        self.score[index] = played if np.isnan(self.score[index]) else self.score[index] + played

    def add_all(self, indices: Sequence[int], results: Sequence[ExecResult]) -> None:
        """Fold in finished jobs (``indices[k]`` played ``results[k]``), then tell the
        breaker, which raises after too many infrastructure failures in a row."""
        for index, result in zip(indices, results, strict=True):
            self.add(int(index), result)
        self.results.extend(results)
        if self.health is not None:
            self.health.record(results)
