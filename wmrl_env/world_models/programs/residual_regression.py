"""A task's correction to a pretrained prediction, learned online: Bayesian linear
regression of the prior's residuals on standardised program features.

A task's residual is ``r(x) = z(x) . w + u(x) + e``, ``z`` the standardised program
features with a leading 1 (the task-wide bias), ``w ~ N(0, diag(v))`` with one variance per
block of columns (bias, pipeline slots, model family, hyperparameters), ``u`` the program's
own deviation, which the features do not explain, and ``e`` what differs between two real
runs of the same program (variance ``repeat_noise``); ``noise`` is the variance of the two
together. :func:`fit_blocks` chooses the variances by maximum marginal likelihood over many
tasks' out-of-task residuals; :class:`ResidualPosterior` conditions on one task's anchors,
which moves every program that shares a component with them, and predicts a program that
ran on the task from its own runs as well (:meth:`ResidualPosterior.predict_seen`: with
``repeat_noise`` 0 it answers the runs' reward).

Example:
    >>> rng = np.random.default_rng(0)
    >>> z = np.column_stack([np.ones(40), rng.normal(size=(40, 2))])
    >>> prior = BlockPrior(np.array([0.01, 0.05]), np.array([0, 1, 1]), noise=0.001)
    >>> r = 0.3 * z[:, 1]
    >>> post = ResidualPosterior.fit(prior, z[:8], r[:8])
    >>> mean, var = post.predict(z[8:])
    >>> bool(np.corrcoef(mean, r[8:])[0, 1] > 0.95), bool((var < prior.variance(z[8:])).all())
    (True, True)
    >>> mean, var = post.predict_seen(z[:2], r[:2] + 0.1, np.ones(2))  # no repeat noise
    >>> np.allclose(mean, r[:2] + 0.1), np.allclose(var, 0.0)
    (True, True)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

__all__ = ["BlockPrior", "ResidualPosterior", "fit_blocks"]


@dataclass(frozen=True)
class BlockPrior:
    """Weight variance per block (``variances[blocks[j]]`` for column ``j``) and the noise:
    ``noise`` everywhere, of which ``repeat_noise`` is what a repeated run redraws, plus
    ``level_noise`` times a row's noise shape (e.g. ``4 e (1 - e)`` for a prior reward ``e``
    in [0, 1]: a reward near its bounds varies less)."""

    variances: np.ndarray
    blocks: np.ndarray
    noise: float
    repeat_noise: float = 0.0
    level_noise: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.repeat_noise < self.noise:
            raise ValueError(
                f"repeat_noise must be in [0, noise={self.noise}), got {self.repeat_noise}"
            )
        if self.level_noise < 0:
            raise ValueError(f"level_noise must be >= 0, got {self.level_noise}")

    def program_noise(self, shape: np.ndarray | None = None) -> np.ndarray | float:
        """Variance of a program's own deviation, which its features do not explain, at
        noise ``shape`` (none: the constant part)."""
        own = self.noise - self.repeat_noise
        return own if shape is None else own + self.level_noise * np.asarray(shape)

    @property
    def column_variances(self) -> np.ndarray:
        return np.asarray(self.variances, dtype=np.float64)[np.asarray(self.blocks, dtype=int)]

    def variance(self, z: np.ndarray, shape: np.ndarray | None = None) -> np.ndarray:
        """Prior variance of the residual (weights and noise) at each row of ``z``."""
        noise = self.program_noise(_shape(shape, z)) + self.repeat_noise
        return (z**2) @ self.column_variances + noise

    def log_likelihood(
        self, z: np.ndarray, r: np.ndarray, shape: np.ndarray | None = None
    ) -> float:
        """log N(r; 0, Z V Z' + D), D the rows' noise, by the weight-space identity (d x d
        work)."""
        v = self.column_variances
        noise = self.program_noise(_shape(shape, z)) + self.repeat_noise
        a = (z.T / noise) @ z + np.diag(1.0 / v)
        chol = np.linalg.cholesky(a)
        b = np.linalg.solve(chol, z.T @ (r / noise))
        log_det = 2 * np.log(np.diag(chol)).sum() + np.log(v).sum() + np.log(noise).sum()
        quad = r @ (r / noise) - b @ b
        return float(-0.5 * (quad + log_det + len(r) * np.log(2 * np.pi)))


@dataclass(frozen=True)
class ResidualPosterior:
    """The weights' Gaussian posterior given one task's anchors, with the noise it was
    conditioned with: the prior's, and the task's repeat noise."""

    mean: np.ndarray
    covariance: np.ndarray
    prior: BlockPrior
    repeat_noise: float

    @classmethod
    def fit(
        cls,
        prior: BlockPrior,
        z: np.ndarray,
        r: np.ndarray,
        counts: np.ndarray | None = None,
        repeat_noise: float | None = None,
        shape: np.ndarray | None = None,
    ) -> ResidualPosterior:
        """Condition on ``r``, each row a program's mean residual over ``counts`` runs
        (default one each) at noise ``shape``; ``repeat_noise`` replaces the prior's (a
        task's own estimate)."""
        repeat = prior.repeat_noise if repeat_noise is None else float(repeat_noise)
        counts = np.ones(len(r)) if counts is None else np.asarray(counts, dtype=np.float64)
        weight = 1.0 / (prior.program_noise(_shape(shape, z)) + repeat / counts)
        precision = (z.T * weight) @ z + np.diag(1.0 / prior.column_variances)
        covariance = np.linalg.inv(precision)
        covariance = (covariance + covariance.T) / 2
        mean = covariance @ (z.T @ (weight * r))
        return cls(mean, covariance, prior, repeat)

    @classmethod
    def empty(cls, prior: BlockPrior) -> ResidualPosterior:
        return cls(np.zeros(len(prior.blocks)), np.diag(prior.column_variances), prior,
                   prior.repeat_noise)  # fmt: skip

    def predict(
        self, z: np.ndarray, shape: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean residual and its variance (weights and noise) of a new program's
        run at rows ``z``."""
        noise = self.prior.program_noise(_shape(shape, z)) + self.repeat_noise
        return z @ self.mean, self._weight_variance(z) + noise

    def predict_seen(
        self, z: np.ndarray, r: np.ndarray, counts: np.ndarray, shape: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Mean residual and variance of a new run of programs that ran on the task, their
        mean residual ``r`` over ``counts`` runs among the anchors conditioned on: the
        runs' mean, pulled toward the features' prediction by the share of repeat noise
        in it (``rho = program noise / (program noise + repeat noise / counts)``)."""
        own = self.prior.program_noise(_shape(shape, z))
        entry = own + self.repeat_noise / np.asarray(counts, dtype=np.float64)
        rho = np.divide(own, entry, out=np.zeros_like(entry), where=entry > 0)
        fitted = z @ self.mean
        mean = fitted + rho * (r - fitted)
        variance = (1 - rho) ** 2 * self._weight_variance(z) + (1 - rho) * own
        return mean, variance + self.repeat_noise

    def _weight_variance(self, z: np.ndarray) -> np.ndarray:
        return np.einsum("ij,jk,ik->i", z, self.covariance, z)


def _shape(shape: np.ndarray | None, z: np.ndarray) -> np.ndarray:
    return np.zeros(len(z)) if shape is None else np.asarray(shape, dtype=np.float64)


def fit_blocks(
    tasks: Sequence[tuple[np.ndarray, ...]],
    blocks: np.ndarray,
    level_noise: bool = False,
    repeat_noise: float = 0.0,
) -> BlockPrior:
    """The block variances and noise that maximise the summed marginal likelihood of the
    tasks' ``(z, residuals)`` or ``(z, residuals, noise shape)``; with ``level_noise`` the
    noise's shaped part is fitted too (else 0). The constant noise is ``repeat_noise`` (a
    known part, kept in the result) plus what the fit adds."""
    blocks = np.asarray(blocks, dtype=int)
    n_blocks = int(blocks.max()) + 1
    spread = float(np.mean([np.var(t[1]) for t in tasks]))
    n_noise = 2 if level_noise else 1

    def prior_of(theta: np.ndarray) -> BlockPrior:
        shaped = float(np.exp(theta[n_blocks + 1])) if level_noise else 0.0
        noise = repeat_noise + float(np.exp(theta[n_blocks]))
        return BlockPrior(np.exp(theta[:n_blocks]), blocks, noise, repeat_noise, shaped)

    def loss(theta: np.ndarray) -> float:
        prior = prior_of(np.clip(theta, -18, 4))
        return -sum(prior.log_likelihood(*t) for t in tasks)

    start = np.log(np.full(n_blocks + n_noise, max(spread, 1e-6) / 4))
    best = minimize(loss, start, method="L-BFGS-B", bounds=[(-18, 4)] * (n_blocks + n_noise))
    return prior_of(best.x)
