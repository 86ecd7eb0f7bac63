"""The circuit breaker every anchored round shares: real execution that keeps failing in the
infrastructure stops training instead of leaving it to the world model alone."""

from __future__ import annotations

from collections.abc import Sequence

from wmrl_env.executors.base import ExecResult

__all__ = [
    "DEFAULT_MAX_INFRASTRUCTURE_FAILURES",
    "InfrastructureFailureError",
    "InfrastructureHealth",
]

DEFAULT_MAX_INFRASTRUCTURE_FAILURES = 32


class InfrastructureFailureError(RuntimeError):
    """Real execution keeps failing in the infrastructure (dead workers, a daemon that is
    down): training would carry on with no real signal."""


class InfrastructureHealth:
    """Counts consecutive infrastructure failures over every real execution of a run;
    ``limit`` in a row raise :class:`InfrastructureFailureError` (0: never). A program's own
    failure (crash, timeout) or a success ends the streak.

    >>> from wmrl_env.executors.base import ExecResult, ExecStatus
    >>> health = InfrastructureHealth(limit=2)
    >>> health.record([ExecResult("a", ExecStatus.ERROR), ExecResult("b", ExecStatus.CRASHED)])
    >>> health.streak
    0
    >>> try:
    ...     health.record([ExecResult("c", ExecStatus.ERROR), ExecResult("d", ExecStatus.ERROR)])
    ... except InfrastructureFailureError as error:
    ...     print(str(error)[:55])
    2 real executions in a row failed in the infrastructure
    """

    def __init__(self, limit: int) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ValueError(f"max_infrastructure_failures must be an int >= 0, got {limit!r}")
        self.limit = limit
        self.streak = 0

    def record(self, results: Sequence[ExecResult]) -> None:
        """Fold in finished executions, in the order they finished."""
        for result in results:
            self.streak = self.streak + 1 if result.status.is_infrastructure_failure else 0
            if self.limit and self.streak >= self.limit:
                raise InfrastructureFailureError(
                    f"{self.streak} real executions in a row failed in the infrastructure "
                    f"(last: {result.message or result.status.value!r}): no real signal reaches "
                    "the fusion. Check the executor (workers, sandbox daemon, pool start-up); "
                    "max_infrastructure_failures sets this limit"
                )
