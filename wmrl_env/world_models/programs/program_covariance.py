"""How programs co-vary across tasks: a shrunk program-program covariance of residuals.

On a suite of tasks, a program's score error on one task says much about another program's
error on the same task (a ``log1p`` program that fails tells that the other ``log1p``
programs fail, a task where forests beat the prediction is one where boosting does too).
:func:`fit_program_covariance` estimates that covariance over a fixed set of reference
programs (the grid) from a tasks x programs matrix of residuals (NaN where a task did not
run a program), shrinks it toward a structured target (the mean correlation of pairs that
share the same attributes, e.g. same model, other preprocessing) and keeps it positive
definite. :class:`ProfilePosterior` is the Gaussian posterior of a task's residuals given
its anchors (duplicates merged per program: mean residual, count); a program off the grid
enters as weights over grid programs plus variance of its own.

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> shared = rng.normal(size=(200, 1))  # one task effect that moves programs 0 and 1
    >>> residuals = np.hstack([shared, shared, rng.normal(size=(200, 1))])
    >>> residuals += 0.1 * rng.normal(size=(200, 3))
    >>> cov = fit_program_covariance(residuals, shrinkage=0.0)
    >>> grid = np.eye(3)  # the three grid programs, one-hot
    >>> seen = ProfilePosterior.fit(cov, grid[:1], np.zeros(1), np.array(["a"]),
    ...                             residuals=np.array([1.0]), counts=np.array([1]))
    >>> mean, var = seen.predict(grid, np.zeros(3), np.array(["a", "b", "c"]))
    >>> bool(abs(mean[1] - 1.0) < 0.1 and abs(mean[2]) < 0.2), bool(var[1] < 0.1)
    (True, True)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import cho_factor, cho_solve

__all__ = [
    "ProfilePosterior",
    "ProgramCovariance",
    "choose_covariance",
    "fit_program_covariance",
    "identified",
]


@dataclass(frozen=True)
class ProgramCovariance:
    """Mean and covariance of the residuals of the grid programs on one task, and the
    variance ``noise`` of one execution's deviation from its program's residual."""

    mean: np.ndarray
    covariance: np.ndarray
    noise: float

    def prior(self, weights: np.ndarray, extra: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Prior mean and variance of programs given as weights over the grid (a grid
        program is one-hot) plus an independent ``extra`` variance (0 on the grid)."""
        variance = np.einsum("ij,jk,ik->i", weights, self.covariance, weights) + extra
        return weights @ self.mean, variance


@dataclass(frozen=True)
class ProfilePosterior:
    """The posterior of one task's residuals given its anchors: distinct programs (weights
    over the grid, extra variance, a key), each with the mean residual of ``counts``
    executions. Predicts the latent residual of any program (noise not included)."""

    covariance: ProgramCovariance
    weights: np.ndarray
    extra: np.ndarray
    keys: np.ndarray
    factor: np.ndarray
    alpha: np.ndarray

    @classmethod
    def fit(
        cls,
        covariance: ProgramCovariance,
        weights: np.ndarray,
        extra: np.ndarray,
        keys: np.ndarray,
        residuals: np.ndarray,
        counts: np.ndarray,
    ) -> ProfilePosterior:
        gram = weights @ covariance.covariance @ weights.T + np.diag(
            extra + covariance.noise / counts
        )
        lower = np.tril(cho_factor(gram, lower=True)[0])
        prior_mean, _ = covariance.prior(weights, extra)
        alpha = cho_solve((lower, True), residuals - prior_mean)
        return cls(covariance, weights, extra, np.asarray(keys), lower, alpha)

    def predict(
        self, weights: np.ndarray, extra: np.ndarray, keys: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and variance of the residuals of programs (weights, extra, key)."""
        mean, variance = self.covariance.prior(weights, extra)
        cross = weights @ self.covariance.covariance @ self.weights.T
        cross += (np.asarray(keys)[:, None] == self.keys[None, :]) * extra[:, None]
        explained = (cross * cho_solve((self.factor, True), cross.T).T).sum(axis=1)
        return mean + cross @ self.alpha, np.maximum(variance - explained, 0.0)


def _pairwise_moments(residuals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-program means and the pairwise-complete covariance (NaN = not observed)."""
    seen = ~np.isnan(residuals)
    mean = np.nansum(residuals, axis=0) / np.maximum(seen.sum(axis=0), 1)
    centred = np.where(seen, residuals - mean, 0.0)
    pairs = seen.T.astype(np.float64) @ seen
    covariance = (centred.T @ centred) / np.maximum(pairs, 1.0)
    floor = np.nanmean(np.where(seen, centred, np.nan) ** 2)  # a never-seen program's variance
    empty = np.diag(pairs) == 0
    covariance[empty, empty] = floor
    return mean, covariance


def _structured_target(covariance: np.ndarray, attributes: np.ndarray | None) -> np.ndarray:
    """Same variances; each pair's correlation replaced by the mean correlation of the
    pairs that share exactly the same attributes (one pattern when ``attributes`` is None)."""
    sd = np.sqrt(np.diag(covariance))
    correlation = covariance / np.outer(sd, sd)
    n = len(sd)
    if attributes is None:
        pattern = np.zeros((n, n), dtype=np.int64)
    else:
        attributes = np.asarray(attributes).reshape(n, -1)
        shared = attributes[:, None, :] == attributes[None, :, :]
        pattern = (shared * (2 ** np.arange(attributes.shape[1]))).sum(axis=2)
    off = ~np.eye(n, dtype=bool)
    target = np.eye(n)
    for value in np.unique(pattern[off]):
        members = (pattern == value) & off
        target[members] = correlation[members].mean()
    return target * np.outer(sd, sd)


def fit_program_covariance(
    residuals: np.ndarray,
    *,
    attributes: np.ndarray | None = None,
    shrinkage: float = 0.5,
    noise_share: float = 0.01,
) -> ProgramCovariance:
    """Fit from a tasks x programs matrix of residuals (NaN where not observed).

    ``attributes`` (programs x k, optional) gives each program's categorical attributes for
    the shrinkage target; ``shrinkage`` in [0, 1] is the target's weight; the execution
    noise is ``noise_share`` x the mean variance.
    """
    residuals = np.asarray(residuals, dtype=np.float64)
    if residuals.ndim != 2 or residuals.shape[0] < 2:
        raise ValueError(f"need a tasks x programs matrix of 2+ tasks, got {residuals.shape}")
    if not 0.0 <= shrinkage <= 1.0:
        raise ValueError(f"shrinkage must be in [0, 1], got {shrinkage}")
    mean, sample = _pairwise_moments(residuals)
    mixed = (1.0 - shrinkage) * sample + shrinkage * _structured_target(sample, attributes)
    values, vectors = np.linalg.eigh(0.5 * (mixed + mixed.T))
    scale = float(np.mean(np.diag(sample)))
    values = np.maximum(values, 1e-4 * scale)  # positive definite
    covariance = (vectors * values) @ vectors.T
    return ProgramCovariance(mean, covariance, noise_share * scale)


def choose_covariance(
    residuals: np.ndarray,
    folds: np.ndarray,
    *,
    attributes: np.ndarray | None = None,
    shrinkages: tuple[float, ...] = (0.1, 0.3, 0.5, 0.7, 0.9),
    noise_shares: tuple[float, ...] = (0.01, 0.03, 0.1, 0.3),
    anchor_counts: tuple[int, ...] = (8, 16, 32),
    seed: int = 0,
) -> tuple[float, float]:
    """The shrinkage and noise share whose covariance, fitted without a fold of tasks,
    best predicts that fold's residuals from a few of them: per held-out task and each of
    ``anchor_counts``, that many random observed programs (at most all but 4) condition the
    posterior, scored by the squared error of its mean on the task's other observed
    programs (summed over folds and counts). This is the use (a held-out likelihood
    favours heavier shrinkage: the residuals are heavy-tailed); a larger noise share makes
    the posterior trust each anchor less (the residuals are not exactly Gaussian).

    >>> rng = np.random.default_rng(0)
    >>> shared = rng.normal(size=(60, 1))
    >>> residuals = np.hstack([shared] * 6) + 0.3 * rng.normal(size=(60, 6))
    >>> shrinkage, noise = choose_covariance(residuals, np.arange(60) % 3, anchor_counts=(1,))
    >>> 0.0 <= shrinkage <= 1.0 and 0.0 < noise < 1.0
    True
    """
    rng = np.random.default_rng(seed)
    splits = []  # per task: (anchors, rest) for each anchor count that leaves 4 programs
    for row in residuals:
        observed = np.flatnonzero(~np.isnan(row))
        counts = [min(n, len(observed) - 4) for n in anchor_counts]
        orders = [rng.permutation(observed) for _ in counts]
        splits.append([(o[:k], o[k:]) for o, k in zip(orders, counts, strict=True) if k > 0])
    errors: dict[tuple[float, float], float] = {}
    for fold in np.unique(folds):
        for shrinkage in shrinkages:
            unit = fit_program_covariance(  # noise = the mean variance; scaled below
                residuals[folds != fold], attributes=attributes, shrinkage=shrinkage,
                noise_share=1.0,
            )  # fmt: skip
            mean, cov = unit.mean, unit.covariance
            for noise_share in noise_shares:
                noise = unit.noise * noise_share
                total = 0.0
                for task in np.flatnonzero(folds == fold):
                    row = residuals[task] - mean
                    for anchors, rest in splits[task]:
                        gram = cov[np.ix_(anchors, anchors)] + noise * np.eye(len(anchors))
                        alpha = cho_solve(cho_factor(gram, lower=True), row[anchors])
                        total += float(
                            np.sum((cov[np.ix_(rest, anchors)] @ alpha - row[rest]) ** 2)
                        )
                key = (shrinkage, noise_share)
                errors[key] = errors.get(key, 0.0) + total
    return min(errors, key=errors.get)


def identified(residuals: np.ndarray, *, min_tasks: int = 8, min_share: float = 0.5) -> bool:
    """Whether a tasks x programs residual matrix (NaN = not run) can teach a covariance:
    at least ``min_share`` of the program pairs ran together on ``min_tasks`` tasks or more
    (a suite whose tasks all ran the same 20 of 72 programs cannot: 8 % of the pairs).

    >>> full = np.zeros((10, 4))
    >>> sparse = full.copy(); sparse[:, 2:] = np.nan
    >>> identified(full), identified(sparse)
    (True, False)
    """
    seen = (~np.isnan(np.asarray(residuals, dtype=np.float64))).astype(np.float64)
    together = seen.T @ seen
    return bool(np.mean(together >= min_tasks) >= min_share)
