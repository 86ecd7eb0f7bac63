"""Do the compiled kernel's matrix-vector products give numpy's floats on this machine?

robosuite computes a site's velocity, the decoupled wrench and the arm's torques with numpy's
``np.dot``; the compiled kernel (:mod:`.substep_kernel`) computes the same products with
numba's ``np.dot``, which calls SciPy's BLAS, not numpy's. Both are OpenBLAS builds that pick
their kernels by CPU, and they agree bit for bit only while they pick the same ones.
:func:`blas_disagreement` compares the two on the kernel's own shapes and layouts, with
values drawn like the controller's (Jacobians, velocities, the lambda matrices robosuite's
``opspace_matrices`` returns, forces over several magnitudes), once per shape and process.

Example (needs robosuite)::

    reason = blas_disagreement(nv=9, size=7)   # None where every product is the same float
"""

from __future__ import annotations

import functools

import numpy as np

__all__ = ["blas_disagreement"]

_TRIALS = 64


def _numpy_products(
    jacp: np.ndarray,
    qvel: np.ndarray,
    lambda_pos: np.ndarray,
    force: np.ndarray,
    j_full: np.ndarray,
    wrench: np.ndarray,
) -> tuple[np.ndarray, ...]:
    """robosuite's own products (numpy's ``np.dot``), as ``kernel_products`` makes them."""
    return np.dot(jacp, qvel), np.dot(lambda_pos, force), np.dot(j_full.T, wrench)


@functools.cache
def blas_disagreement(nv: int, size: int) -> str | None:
    """Why the kernel's products are not numpy's for a model of ``nv`` degrees of freedom and
    an arm of ``size`` joints (the first product that differs), or ``None`` where all agree."""
    from robosuite.utils.control_utils import opspace_matrices

    from wmrl_env.envs.robosuite.substep_kernel import kernel_products

    rng = np.random.default_rng(0)
    for trial in range(_TRIALS):
        scale = 10.0 ** rng.uniform(-3, 3)  # velocities and errors from still to violent
        jac = rng.normal(size=(6, nv))
        qvel = rng.normal(size=nv) * scale
        j_full = np.ascontiguousarray(jac[:, :size])
        root = rng.normal(size=(size, size))
        mass = (root @ root.T + size * np.eye(size)).T  # Fortran order, as the kernel's
        _, lambda_pos, _, _ = opspace_matrices(mass, j_full, j_full[:3], j_full[3:])
        force, wrench = rng.normal(size=3) * scale, rng.normal(size=6) * scale
        arguments = (jac[:3], qvel, lambda_pos, force, j_full, wrench)
        names = ("a site's velocity", "the decoupled force", "the arm's torques")
        for name, ours, theirs in zip(
            names, kernel_products(*arguments), _numpy_products(*arguments), strict=True
        ):
            if not np.array_equal(ours, theirs):
                worst = float(np.max(np.abs(ours - theirs)))
                return (
                    f"numba's np.dot (SciPy's BLAS) and numpy's give different floats here "
                    f"({name}, nv={nv}, {size} joints, trial {trial}: up to {worst:.3g})"
                )
    return None
