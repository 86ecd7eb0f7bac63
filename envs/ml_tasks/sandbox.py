"""The local sandbox configuration ML tasks run under (the env's default and the table's).

One place, so that live rewards and the committed execution table come from the same
conditions: 2 GiB address space per program (numpy + scikit-learn need ~350 MB just to
import) and single-threaded BLAS / OpenMP, so ``max_workers`` programs share the CPUs evenly.
"""

from __future__ import annotations

from typing import Any

from .tasks import DEFAULT_TIMEOUT_S

__all__ = ["SANDBOX_ENV", "SANDBOX_MEMORY_MB", "default_sandbox"]

SANDBOX_MEMORY_MB = 2048
SANDBOX_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def default_sandbox(
    max_workers: int | None = None, timeout_s: float = DEFAULT_TIMEOUT_S, *, warm: bool = False
) -> Any:
    """A :class:`~wmrl_env.executors.LocalSandbox` configured for ML tasks (``warm``: on the
    warm pool, see :mod:`wmrl_env.executors.warm`)."""
    from wmrl_env.executors import LocalSandbox

    return LocalSandbox(
        timeout_s=timeout_s,
        memory_mb=SANDBOX_MEMORY_MB,
        max_workers=max_workers,
        env=SANDBOX_ENV,
        warm=warm,
    )
