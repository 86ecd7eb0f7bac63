"""The Executor contract that every real-execution backend implements.

Two families implement it: :mod:`wmrl_env.sandboxes` runs Python programs (local, Docker,
Ray, cached, replayed) and :mod:`wmrl_env.env_executors` plays episodes in gymnasium envs.

Example:
    >>> from wmrl_env.executors import ExecResult, ExecStatus
    >>> ExecResult(job_id="a", status=ExecStatus.TIMEOUT).ok
    False
"""

from wmrl_env.executors.base import (
    BaseExecutor,
    ExecResult,
    ExecStatus,
    Executor,
    ExecutorClosedError,
    new_job_id,
    outcome_score,
)

__all__ = [
    "BaseExecutor",
    "ExecResult",
    "ExecStatus",
    "Executor",
    "ExecutorClosedError",
    "new_job_id",
    "outcome_score",
]
