"""Real execution: the Executor contract and its backends.

Backends with heavy dependencies (Docker, Ray) import them only when constructed.
"""

from wmrl_env.executors.base import (
    BaseExecutor,
    ExecResult,
    ExecStatus,
    Executor,
    ExecutorClosedError,
    InvalidOutputError,
    Job,
    Scorer,
)

__all__ = [
    "BaseExecutor",
    "ExecResult",
    "ExecStatus",
    "Executor",
    "ExecutorClosedError",
    "InvalidOutputError",
    "Job",
    "Scorer",
]
