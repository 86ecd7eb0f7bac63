"""The Executor contract: run jobs for real and report every outcome, never raise for a bad job.

An executor takes a batch of jobs, runs them (programs in a sandbox, a container or a Ray
cluster: :mod:`wmrl_env.sandboxes`; episodes in gymnasium envs: :mod:`wmrl_env.env_executors`)
and returns one :class:`ExecResult` per job, in order. A job that crashes, times out,
exhausts memory or writes garbage is a *result* with a status, not an exception: real
executions are expensive and one failure must not lose the rest of the batch. Executors raise
only for misuse (a closed executor, a job of the wrong type) and for infrastructure that cannot
start (a Docker daemon that is down), with a message that says what to do.

Example:
    >>> from wmrl_env.executors.base import ExecResult, ExecStatus
    >>> r = ExecResult(job_id="a", status=ExecStatus.OK, score=0.75, wall_seconds=1.2)
    >>> r.ok, r.status == "ok"
    (True, True)
"""

from __future__ import annotations

import abc
import enum
import math
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

__all__ = [
    "BaseExecutor",
    "ExecResult",
    "ExecStatus",
    "Executor",
    "ExecutorClosedError",
    "new_job_id",
    "outcome_score",
]


class ExecStatus(str, enum.Enum):
    """How a real execution ended. Only ``OK`` carries a trustworthy score.

    Two kinds of failure, and they mean different things to a learner:

    - a *program failure* (``TIMEOUT``, ``OUT_OF_MEMORY``, ``CRASHED``, ``INVALID_OUTPUT``)
      is the outcome of the action itself: the policy wrote a program that crashed. It is
      scored as a failure (see :func:`outcome_score`), never left out;
    - an *infrastructure failure* (``ERROR``: a dead daemon, a worker that died, a scorer bug)
      says nothing about the action: its score is missing (NaN).

    Example:
        >>> ExecStatus.CRASHED.is_program_failure, ExecStatus.ERROR.is_program_failure
        (True, False)
    """

    OK = "ok"
    TIMEOUT = "timeout"
    OUT_OF_MEMORY = "out_of_memory"
    CRASHED = "crashed"
    INVALID_OUTPUT = "invalid_output"
    ERROR = "error"  # the executor itself failed (daemon gone, worker died, scorer bug)

    def __str__(self) -> str:
        return self.value

    @property
    def is_program_failure(self) -> bool:
        """The action's own failure (crash, timeout, out of memory, invalid output)."""
        return self in _PROGRAM_FAILURES

    @property
    def is_infrastructure_failure(self) -> bool:
        """The executor's failure: the action's outcome is unknown."""
        return self is ExecStatus.ERROR


_PROGRAM_FAILURES = frozenset(
    {ExecStatus.TIMEOUT, ExecStatus.OUT_OF_MEMORY, ExecStatus.CRASHED, ExecStatus.INVALID_OUTPUT}
)


def outcome_score(result: ExecResult, failure_score: float) -> float:
    """The reward a real execution earns: its score when it ran, ``failure_score`` when the
    program failed (or ran but yielded no finite score), NaN when the infrastructure failed.

    Example:
        >>> outcome_score(ExecResult("a", ExecStatus.OK, score=0.8), 0.0)
        0.8
        >>> outcome_score(ExecResult("b", ExecStatus.CRASHED), 0.0)
        0.0
        >>> outcome_score(ExecResult("c", ExecStatus.ERROR), 0.0)
        nan
    """
    if result.status.is_infrastructure_failure:
        return math.nan
    if result.ok and math.isfinite(result.score):
        return result.score
    return float(failure_score)


class ExecutorClosedError(RuntimeError):
    """The executor was used after :meth:`Executor.close`."""


def new_job_id() -> str:
    """A fresh unique job id (a random UUID4 in hex)."""
    return uuid.uuid4().hex


@dataclass(frozen=True)
class ExecResult:
    """The outcome of one real execution.

    Attributes:
        job_id: the job's id.
        status: how it ended; ``score`` is meaningful only when ``status`` is ``OK``.
        score: the scorer's value, NaN when there is none or the job failed.
        wall_seconds: measured seconds from start to result for this job.
        exec_seconds: seconds of real execution charged to this job in cost accounting
            (equals ``wall_seconds`` for live runs; the recorded seconds for a replay).
        stdout, stderr: tails of the program's output, capped by the executor.
        outputs: collected output files, name -> content.
        message: a human-readable reason when ``status`` is not ``OK``.
        metadata: backend facts (isolation used, container id, cache hit, job tags, ...).
    """

    job_id: str
    status: ExecStatus
    score: float = math.nan
    wall_seconds: float = 0.0
    exec_seconds: float = 0.0
    stdout: str = ""
    stderr: str = ""
    outputs: Mapping[str, bytes] = field(default_factory=dict)
    message: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", ExecStatus(self.status))
        object.__setattr__(self, "score", float(self.score))

    @property
    def ok(self) -> bool:
        return self.status is ExecStatus.OK


JobT = TypeVar("JobT", contravariant=True)


@runtime_checkable
class Executor(Protocol[JobT]):
    """Runs jobs for real. ``submit`` must not block on execution; ``run`` does."""

    def submit(self, jobs: Sequence[JobT]) -> list[Future[ExecResult]]:
        """Start every job; return one future per job, in order. Futures never raise for a
        failed job: they resolve to an :class:`ExecResult` with a non-OK status."""
        ...

    def run(self, jobs: Sequence[JobT]) -> list[ExecResult]:
        """Run every job and wait; one result per job, in order."""
        ...

    def close(self) -> None:
        """Release workers, processes and containers. Idempotent."""
        ...


J = TypeVar("J")


class BaseExecutor(abc.ABC, Generic[J]):
    """Shared plumbing: ``run`` via ``submit``, context manager, closed-state checks.

    Subclasses implement :meth:`_submit` and :meth:`_close`.
    """

    _closed: bool = False

    def submit(self, jobs: Sequence[J]) -> list[Future[ExecResult]]:
        if self._closed:
            raise ExecutorClosedError(f"{type(self).__name__} is closed")
        jobs = list(jobs)
        ids = [getattr(job, "job_id", None) for job in jobs]
        named = [i for i in ids if i is not None]
        if len(set(named)) != len(named):
            raise ValueError("job ids must be unique within a batch")
        return self._submit(jobs)

    def run(self, jobs: Sequence[J]) -> list[ExecResult]:
        futures = self.submit(jobs)
        try:
            return [future.result() for future in futures]
        except KeyboardInterrupt:
            self.close()  # Ctrl-C: kill the jobs that run, release workers and containers
            raise

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._close()

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> BaseExecutor[J]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @abc.abstractmethod
    def _submit(self, jobs: list[J]) -> list[Future[ExecResult]]: ...

    @abc.abstractmethod
    def _close(self) -> None: ...
