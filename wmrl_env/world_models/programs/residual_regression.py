"""A task's correction to a pretrained prediction, learned online: Bayesian linear
regression of the prior's residuals on standardised program features.

A task's residual is ``r(x) = z(x) . w + noise``, ``z`` the standardised program features
with a leading 1 (the task-wide bias), ``w ~ N(0, diag(v))`` with one variance per block of
columns (bias, pipeline slots, model family, hyperparameters) and noise variance ``noise``.
:func:`fit_blocks` chooses the variances by maximum marginal likelihood over many tasks'
out-of-task residuals; :class:`ResidualPosterior` conditions on one task's anchors, which
moves every program that shares a component with them.

Example:
    >>> rng = np.random.default_rng(0)
    >>> z = np.column_stack([np.ones(40), rng.normal(size=(40, 2))])
    >>> prior = BlockPrior(np.array([0.01, 0.05]), np.array([0, 1, 1]), noise=0.001)
    >>> r = 0.3 * z[:, 1]
    >>> post = ResidualPosterior.fit(prior, z[:8], r[:8])
    >>> mean, var = post.predict(z[8:])
    >>> bool(np.corrcoef(mean, r[8:])[0, 1] > 0.95), bool((var < prior.variance(z[8:])).all())
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
    """Weight variance per block (``variances[blocks[j]]`` for column ``j``) and noise."""

    variances: np.ndarray
    blocks: np.ndarray
    noise: float

    @property
    def column_variances(self) -> np.ndarray:
        return np.asarray(self.variances, dtype=np.float64)[np.asarray(self.blocks, dtype=int)]

    def variance(self, z: np.ndarray) -> np.ndarray:
        """Prior variance of the residual (weights and noise) at each row of ``z``."""
        return (z**2) @ self.column_variances + self.noise

    def log_likelihood(self, z: np.ndarray, r: np.ndarray) -> float:
        """log N(r; 0, Z V Z' + noise I), by the weight-space identity (d x d work)."""
        v = self.column_variances
        n = len(r)
        a = z.T @ z / self.noise + np.diag(1.0 / v)
        chol = np.linalg.cholesky(a)
        b = np.linalg.solve(chol, z.T @ r) / self.noise
        log_det = 2 * np.log(np.diag(chol)).sum() + np.log(v).sum() + n * np.log(self.noise)
        quad = r @ r / self.noise - b @ b
        return float(-0.5 * (quad + log_det + n * np.log(2 * np.pi)))


@dataclass(frozen=True)
class ResidualPosterior:
    """The weights' Gaussian posterior given one task's anchors."""

    mean: np.ndarray
    covariance: np.ndarray
    noise: float

    @classmethod
    def fit(cls, prior: BlockPrior, z: np.ndarray, r: np.ndarray) -> ResidualPosterior:
        precision = z.T @ z / prior.noise + np.diag(1.0 / prior.column_variances)
        covariance = np.linalg.inv(precision)
        covariance = (covariance + covariance.T) / 2
        return cls(covariance @ (z.T @ r) / prior.noise, covariance, prior.noise)

    @classmethod
    def empty(cls, prior: BlockPrior) -> ResidualPosterior:
        return cls(np.zeros(len(prior.blocks)), np.diag(prior.column_variances), prior.noise)

    def predict(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean residual and its variance (weights and noise) at rows ``z``."""
        return z @ self.mean, np.einsum("ij,jk,ik->i", z, self.covariance, z) + self.noise


def fit_blocks(tasks: Sequence[tuple[np.ndarray, np.ndarray]], blocks: np.ndarray) -> BlockPrior:
    """The block variances and noise that maximise the summed marginal likelihood of the
    tasks' ``(z, residuals)``."""
    blocks = np.asarray(blocks, dtype=int)
    n_blocks = int(blocks.max()) + 1
    spread = float(np.mean([np.var(r) for _, r in tasks]))

    def prior_of(theta: np.ndarray) -> BlockPrior:
        return BlockPrior(np.exp(theta[:n_blocks]), blocks, float(np.exp(theta[n_blocks])))

    def loss(theta: np.ndarray) -> float:
        prior = prior_of(np.clip(theta, -18, 4))
        return -sum(prior.log_likelihood(z, r) for z, r in tasks)

    start = np.log(np.full(n_blocks + 1, max(spread, 1e-6) / 4))
    best = minimize(loss, start, method="L-BFGS-B", bounds=[(-18, 4)] * (n_blocks + 1))
    return prior_of(best.x)
