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

__all__ = [
    "ALLOW_WEAK_VARIABLE",
    "SANDBOX_ENV",
    "SANDBOX_MEMORY_MB",
    "default_sandbox",
    "weak_isolation_allowed",
]

SANDBOX_MEMORY_MB = 2048
ALLOW_WEAK_VARIABLE = "WMRL_ALLOW_WEAK_ISOLATION"
SANDBOX_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def default_sandbox(
    max_workers: int | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    *,
    warm: bool = False,
    allow_weak_isolation: bool = False,
    suite_programs: bool = False,
) -> Any:
    """A :class:`~wmrl_env.sandboxes.LocalSandbox` configured for ML tasks.

    Args:
        warm: run on the warm pool (see :mod:`wmrl_env.sandboxes.warm`).
        allow_weak_isolation: run under resource limits only where bubblewrap cannot work
            (see :class:`~wmrl_env.sandboxes.LocalSandbox`): the only opt-in that covers
            arbitrary programs (``MLTaskEnv``'s text actions), and only passed in code.
        suite_programs: the caller runs only the suite's own structured programs
            (:func:`~wmrl_env.envs.ml_tasks.programs.render_program`): then
            ``$WMRL_ALLOW_WEAK_ISOLATION=1`` opts in as well (``scripts/bench.sh`` sets it).
            Never for programs a policy or a user wrote.
    """
    from wmrl_env.sandboxes import LocalSandbox

    return LocalSandbox(
        timeout_s=timeout_s,
        memory_mb=SANDBOX_MEMORY_MB,
        max_workers=max_workers,
        env=SANDBOX_ENV,
        warm=warm,
        allow_weak_isolation=weak_isolation_allowed(allow_weak_isolation, suite_programs),
    )


def weak_isolation_allowed(allow_weak_isolation: bool, suite_programs: bool) -> bool:
    """The code's opt-in, or, for the suite's own programs only, the environment's.

    >>> import os
    >>> os.environ[ALLOW_WEAK_VARIABLE] = "1"
    >>> weak_isolation_allowed(allow_weak_isolation=False, suite_programs=False)
    False
    >>> weak_isolation_allowed(allow_weak_isolation=False, suite_programs=True)
    True
    >>> del os.environ[ALLOW_WEAK_VARIABLE]
    """
    from_environment = os.environ.get(ALLOW_WEAK_VARIABLE, "") in ("1", "true", "yes")
    return allow_weak_isolation or (suite_programs and from_environment)
