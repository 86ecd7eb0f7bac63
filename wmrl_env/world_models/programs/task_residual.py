"""A task-local correction learned online: a Gaussian-process model of one task's residuals.

A pretrained model's error on a task has a task-wide part (its bias on that task) and a part
that depends on the program (it ranks some programs wrongly). :class:`ResidualPrior` models
both: residual ``e(x) ~ GP(0, bias + signal * exp(-|W (x - x')|^2 / (2 d)))`` plus
independent noise, on standardised program features ``x`` (``d`` of them); ``W`` is diagonal,
one inverse length scale per block of features (automatic relevance determination: e.g.
whether the model family matters more than a hyperparameter). Conditioning on a
task's anchors gives a posterior mean that can **reorder** programs (unlike a monotone
calibration) and a posterior variance that shrinks as anchors accumulate, which is where
the world model's std after anchors comes from. The prior's four numbers are fitted by
maximum marginal likelihood on out-of-task residuals of many training tasks.

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> prior = ResidualPrior(bias=0.01, signal=0.02, noise=0.001, weights=np.ones(3))
    >>> x = rng.normal(size=(16, 3)); e = 0.2 * x[:, 0]
    >>> posterior = TaskPosterior.fit(prior, x[:8], e[:8])
    >>> mean, var = posterior.predict(x[8:])
    >>> bool(np.corrcoef(mean, e[8:])[0, 1] > 0.9), bool((var < prior.total).all())
    (True, True)
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.linalg import cho_factor, cho_solve
from scipy.optimize import minimize

__all__ = ["ResidualPrior", "TaskPosterior", "fit_residual_prior"]


@dataclass(frozen=True)
class ResidualPrior:
    """Variances of the residual's task-wide part (``bias``), its program-dependent part
    and independent noise (``noise``). The program-dependent part is one RBF over every
    column (variance ``signal``) plus, per block of columns, an RBF over that block alone
    (variances ``block_signal``; an additive effect, e.g. "on this task k-NN is better than
    predicted", whatever the preprocessing). ``weights`` are the inverse length scales of
    the columns (units of ``sqrt(columns)`` standardised features); ``blocks`` the block id
    of each column."""

    bias: float
    signal: float
    noise: float
    weights: np.ndarray
    blocks: np.ndarray | None = None
    block_signal: np.ndarray | None = None

    def __post_init__(self) -> None:
        weights = np.asarray(self.weights, dtype=np.float64)
        blocks = np.zeros(len(weights), dtype=int) if self.blocks is None else self.blocks
        blocks = np.asarray(blocks, dtype=int)
        n_blocks = int(blocks.max()) + 1 if len(blocks) else 0
        block_signal = np.zeros(n_blocks) if self.block_signal is None else self.block_signal
        block_signal = np.asarray(block_signal, dtype=np.float64)
        if (
            min(self.bias, self.signal) < 0
            or self.noise <= 0
            or (weights < 0).any()
            or (block_signal < 0).any()
            or blocks.shape != weights.shape
            or block_signal.shape != (n_blocks,)
        ):
            raise ValueError(f"invalid residual prior {self}")
        object.__setattr__(self, "weights", weights)
        object.__setattr__(self, "blocks", blocks)
        object.__setattr__(self, "block_signal", block_signal)

    @property
    def total(self) -> float:
        """The prior predictive variance of one residual."""
        return self.bias + self.signal + float(self.block_signal.sum()) + self.noise

    def kernel(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a, b = a * self.weights, b * self.weights
        squared = (a[:, None, :] - b[None, :, :]) ** 2
        out = self.bias + self.signal * np.exp(-squared.sum(2) / (2.0 * a.shape[1]))
        for block, variance in enumerate(self.block_signal):
            if variance > 0:
                columns = self.blocks == block
                distance = squared[:, :, columns].sum(2) / (2.0 * columns.sum())
                out = out + variance * np.exp(-distance)
        return out

    def log_likelihood(self, x: np.ndarray, residuals: np.ndarray) -> float:
        """Log marginal likelihood of one task's residuals under this prior."""
        K = self.kernel(x, x) + self.noise * np.eye(len(x))
        factor = cho_factor(K, lower=True)
        alpha = cho_solve(factor, residuals)
        log_det = 2.0 * np.log(np.diag(factor[0])).sum()
        return float(-0.5 * (residuals @ alpha + log_det + len(x) * np.log(2 * np.pi)))


@dataclass(frozen=True)
class TaskPosterior:
    """The residual posterior of one task given its anchors (features ``x``, residuals)."""

    prior: ResidualPrior
    x: np.ndarray
    alpha: np.ndarray
    factor: np.ndarray  # lower Cholesky factor of K + noise I

    @classmethod
    def fit(cls, prior: ResidualPrior, x: np.ndarray, residuals: np.ndarray) -> TaskPosterior:
        K = prior.kernel(x, x) + prior.noise * np.eye(len(x))
        lower, _ = cho_factor(K, lower=True)
        lower = np.tril(lower)
        return cls(prior, x, cho_solve((lower, True), residuals), lower)

    def predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean of the residual, and the predictive variance (noise included)."""
        cross = self.prior.kernel(x, self.x)
        mean = cross @ self.alpha
        solved = cho_solve((self.factor, True), cross.T)
        variance = self.prior.total - self.prior.noise - (cross * solved.T).sum(1)
        return mean, np.maximum(variance, 0.0) + self.prior.noise


def fit_residual_prior(
    x_per_task: Sequence[np.ndarray],
    residuals_per_task: Sequence[np.ndarray],
    blocks: np.ndarray | None = None,
) -> ResidualPrior:
    """The prior maximising the summed marginal likelihood of every task's residuals.

    ``blocks`` gives each input column a block id; columns of one block share a length
    scale (default: one block). A coarse grid starts L-BFGS over the log parameters.
    """
    if not x_per_task:
        raise ValueError("need the residuals of at least one task")
    width = x_per_task[0].shape[1]
    blocks = np.zeros(width, dtype=int) if blocks is None else np.asarray(blocks, dtype=int)
    n_blocks = int(blocks.max()) + 1
    total = float(np.mean(np.concatenate(residuals_per_task) ** 2)) or 1e-6

    def prior_of(theta: np.ndarray) -> ResidualPrior:
        bias, signal, noise = np.exp(theta[:3]) * total
        weights = np.exp(theta[3 : 3 + n_blocks])[blocks]
        block_signal = np.exp(theta[3 + n_blocks :]) * total
        return ResidualPrior(bias, signal, max(noise, 1e-4 * total), weights, blocks, block_signal)

    def loss(theta: np.ndarray) -> float:
        try:
            prior = prior_of(theta)
            return -sum(
                prior.log_likelihood(x, r)
                for x, r in zip(x_per_task, residuals_per_task, strict=True)
            )
        except np.linalg.LinAlgError:
            return np.inf

    shares = np.log([0.05, 0.2, 0.5])
    starts = [
        np.array(
            [b, s, np.log(max(1.0 - np.exp(b) - 2 * np.exp(s), 0.05)), *[w] * n_blocks]
            + [s - np.log(n_blocks)] * n_blocks
        )
        for b, s, w in itertools.product(shares, shares, np.log([0.5, 1.0, 2.0]))
    ]
    start = min(starts, key=loss)
    bounds = (
        [(np.log(1e-4), np.log(10.0))] * 3
        + [(np.log(0.01), np.log(20.0))] * n_blocks
        + [(np.log(1e-4), np.log(10.0))] * n_blocks
    )
    result = minimize(loss, start, method="L-BFGS-B", bounds=bounds, options={"maxiter": 60})
    return prior_of(result.x if result.fun < loss(start) else start)
