"""Seeded synthetic task families: unlimited fresh tasks with a known structure.

A family is a generator ``seed -> Dataset``; the task id ``synth_<family>_s<seed>`` names one
member. Families are chosen so that different model families win: a sparse linear signal
(regularised linear models), Friedman's nonlinear function (trees, boosting, kernels), two
interleaved moons among noise features (local methods), Hastie's sum-of-squares rule
(quadratic features) and a multi-class Gaussian-cluster problem.

Example:
    >>> data = synthetic_dataset("moons", seed=3)
    >>> data.kind, data.X.shape
    ('binary', (600, 10))
    >>> bool((data.X == synthetic_dataset("moons", seed=3).X).all())
    True
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .datasets import Dataset

__all__ = ["SYNTHETIC_FAMILIES", "synthetic_dataset"]


def _names(n: int) -> tuple[str, ...]:
    return tuple(f"x{i}" for i in range(n))


def _sparse_linear(seed: int) -> Dataset:
    from sklearn.datasets import make_regression

    X, y = make_regression(
        n_samples=400, n_features=40, n_informative=5, noise=20.0, random_state=seed
    )
    return Dataset(
        name="sparse_linear",
        title="Synthetic: sparse linear regression",
        about="Forty standard-normal features; the target is a noisy linear function of a "
        "few of them.",
        kind="regression",
        target="a continuous response",
        X=X,
        y=y,
        feature_names=_names(40),
    )


def _friedman1(seed: int) -> Dataset:
    from sklearn.datasets import make_friedman1

    X, y = make_friedman1(n_samples=600, n_features=8, noise=1.0, random_state=seed)
    return Dataset(
        name="friedman1",
        title="Synthetic: Friedman #1 nonlinear regression",
        about="Eight features uniform on [0, 1]; the target is a smooth nonlinear function "
        "of the first five plus Gaussian noise.",
        kind="regression",
        target="a continuous response",
        X=X,
        y=y,
        feature_names=_names(8),
    )


def _moons(seed: int) -> Dataset:
    from sklearn.datasets import make_moons

    rng = np.random.default_rng(seed)
    X, y = make_moons(n_samples=600, noise=0.3, random_state=seed)
    X = np.column_stack([X, rng.normal(size=(600, 8))])
    return Dataset(
        name="moons",
        title="Synthetic: two interleaved half-moons among noise features",
        about="Ten features: two carry two interleaving half-moon clusters, eight are pure noise.",
        kind="binary",
        target="which moon the point belongs to (0 or 1)",
        X=X,
        y=y.astype(np.int64),
        feature_names=_names(10),
    )


def _hastie(seed: int) -> Dataset:
    from sklearn.datasets import make_hastie_10_2

    X, y = make_hastie_10_2(n_samples=800, random_state=seed)
    return Dataset(
        name="hastie",
        title="Synthetic: Hastie et al. 10.2 binary problem",
        about="Ten standard-normal features; the class depends on their squared norm.",
        kind="binary",
        target="the class, 0 or 1",
        X=X,
        y=(y > 0).astype(np.int64),
        feature_names=_names(10),
    )


def _clusters(seed: int) -> Dataset:
    from sklearn.datasets import make_classification

    X, y = make_classification(
        n_samples=800,
        n_features=20,
        n_informative=8,
        n_redundant=4,
        n_classes=4,
        n_clusters_per_class=2,
        class_sep=1.2,
        random_state=seed,
    )
    return Dataset(
        name="clusters",
        title="Synthetic: four classes of Gaussian clusters",
        about="Twenty features: eight informative, four linear combinations of those, the "
        "rest noise; each class is a mixture of two Gaussian clusters.",
        kind="multiclass",
        target="the class, 0-3",
        X=X,
        y=y.astype(np.int64),
        feature_names=_names(20),
    )


SYNTHETIC_FAMILIES: dict[str, Callable[[int], Dataset]] = {
    "sparse_linear": _sparse_linear,
    "friedman1": _friedman1,
    "moons": _moons,
    "hastie": _hastie,
    "clusters": _clusters,
}


def synthetic_dataset(family: str, seed: int) -> Dataset:
    """Generate member ``seed`` of a synthetic family (see :data:`SYNTHETIC_FAMILIES`)."""
    if family not in SYNTHETIC_FAMILIES:
        known = sorted(SYNTHETIC_FAMILIES)
        raise ValueError(f"unknown synthetic family {family!r}; known: {known}")
    if not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    return SYNTHETIC_FAMILIES[family](seed)
