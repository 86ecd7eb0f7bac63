"""The per-task posterior of v4: block variances recovered by maximum marginal likelihood,
and a posterior that beats the prior on programs it was not taught."""

from __future__ import annotations

import numpy as np

from wmrl_env.world_models.programs.residual_regression import (
    BlockPrior,
    ResidualPosterior,
    fit_blocks,
)


def _tasks(prior: BlockPrior, n_tasks: int, n_rows: int, rng: np.random.Generator):
    d = len(prior.blocks)
    tasks = []
    for _ in range(n_tasks):
        z = np.column_stack([np.ones(n_rows), rng.normal(size=(n_rows, d - 1))])
        w = rng.normal(size=d) * np.sqrt(prior.column_variances)
        tasks.append((z, z @ w + rng.normal(size=n_rows) * np.sqrt(prior.noise)))
    return tasks


def test_block_variances_and_noise_are_recovered() -> None:
    """60 tasks of 50 rows drawn from a known prior: each block variance is estimated from
    60 x (its columns) weights, a relative standard error of at most sqrt(2 / 60) = 0.18 for
    the bias and about 0.1 for the others; the noise from 3,000 rows (0.03). Tolerances are
    about three standard errors."""
    truth = BlockPrior(np.array([0.04, 0.01, 0.002]), np.array([0, 1, 1, 1, 2, 2, 2]), 0.005)
    fitted = fit_blocks(_tasks(truth, 60, 50, np.random.default_rng(0)), truth.blocks)
    ratio = fitted.variances / truth.variances
    assert abs(ratio[0] - 1) < 0.55 and all(abs(r - 1) < 0.35 for r in ratio[1:]), ratio
    assert abs(fitted.noise / truth.noise - 1) < 0.12


def test_the_posterior_predicts_untaught_rows_better_than_the_prior() -> None:
    truth = BlockPrior(np.array([0.04, 0.01]), np.array([0, 1, 1, 1, 1]), 0.002)
    rng = np.random.default_rng(1)
    errors_prior, errors_post, inside = [], [], []
    for z, r in _tasks(truth, 200, 40, rng):
        post = ResidualPosterior.fit(truth, z[:16], r[:16])
        mean, var = post.predict(z[16:])
        errors_prior.append(np.mean(r[16:] ** 2))
        errors_post.append(np.mean((r[16:] - mean) ** 2))
        inside.append(np.mean(np.abs(r[16:] - mean) <= np.sqrt(var)))
    assert np.mean(errors_post) < 0.2 * np.mean(errors_prior)
    # the right prior gives calibrated intervals: 4,800 rows, +-1 sd covers 68.3 % (SE ~0.7 %,
    # rows of one task correlated: a 3-point tolerance)
    assert abs(np.mean(inside) - 0.683) < 0.03
