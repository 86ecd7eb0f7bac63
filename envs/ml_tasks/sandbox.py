"""The local sandbox configuration ML tasks run under (the env's default and the table's).

One place, so that live rewards and the committed execution table come from the same
conditions: 2 GiB address space per program (numpy + scikit-learn need ~350 MB just to
import) and single-threaded BLAS / OpenMP, so ``max_workers`` programs share the CPUs evenly.
``warm=True`` runs the programs on the warm pool (numpy, pandas and scikit-learn imported once
per worker inside the sandbox: a job costs its own work plus ~0.1 s instead of a ~3 s
import), with bit-identical scores.
"""

from __future__ import annotations

import os
from typing import Any

from .tasks import DEFAULT_TIMEOUT_S

__all__ = ["ALLOW_WEAK_VARIABLE", "SANDBOX_ENV", "SANDBOX_MEMORY_MB", "default_sandbox"]

SANDBOX_MEMORY_MB = 2048
ALLOW_WEAK_VARIABLE = "WMRL_ALLOW_WEAK_ISOLATION"
SANDBOX_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def default_sandbox(
    max_workers: int | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    *,
    warm: bool = False,
    allow_weak_isolation: bool | None = None,
) -> Any:
    """A :class:`~wmrl_env.sandboxes.LocalSandbox` configured for ML tasks.

    Args:
        warm: run on the warm pool (see :mod:`wmrl_env.sandboxes.warm`).
        allow_weak_isolation: run under resource limits only where bubblewrap cannot work
            (see :class:`~wmrl_env.sandboxes.LocalSandbox`): for the suite's own programs,
            never for untrusted ones. ``None`` reads ``$WMRL_ALLOW_WEAK_ISOLATION`` (``1``
            opts in; ``scripts/bench.sh`` sets it, since the bench runs only the suite's
            programs).
    """
    from wmrl_env.sandboxes import LocalSandbox

    if allow_weak_isolation is None:
        allow_weak_isolation = os.environ.get(ALLOW_WEAK_VARIABLE, "") in ("1", "true", "yes")
    return LocalSandbox(
        timeout_s=timeout_s,
        memory_mb=SANDBOX_MEMORY_MB,
        max_workers=max_workers,
        env=SANDBOX_ENV,
        warm=warm,
        allow_weak_isolation=allow_weak_isolation,
    )
