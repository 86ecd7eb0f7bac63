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


def _exact_gp_prediction(prior, z, r, counts, shape, j):
    """The predictive of a new run of row ``j``'s program from the joint Gaussian (the
    function-space form, n x n): residual = z.w + u + e, each row the mean of counts runs."""
    v = np.diag(prior.column_variances)
    own = prior.program_noise(shape)
    k = z @ v @ z.T + np.diag(own + prior.repeat_noise / counts)
    cross = z @ v @ z[j] + own[j] * (np.arange(len(r)) == j)
    total = z[j] @ v @ z[j] + own[j] + prior.repeat_noise
    return cross @ np.linalg.solve(k, r), total - cross @ np.linalg.solve(k, cross)


def test_a_program_that_ran_is_predicted_as_the_joint_gaussian_says() -> None:
    """predict_seen (weight space, d x d) equals the exact Gaussian predictive of a new run
    of a program among the anchors, for several repeat-noise shares, run counts and noise
    shapes."""
    rng = np.random.default_rng(3)
    z = np.column_stack([np.ones(12), rng.normal(size=(12, 3))])
    r = rng.normal(size=12) * 0.2
    counts = rng.integers(1, 5, size=12).astype(float)
    shape = rng.uniform(size=12)
    for repeat, shaped in ((0.0, 0.0), (0.002, 0.0), (0.009, 0.0), (0.002, 0.05)):
        prior = BlockPrior(np.array([0.04, 0.01]), np.array([0, 1, 1, 1]), 0.01, repeat, shaped)
        post = ResidualPosterior.fit(prior, z, r, counts, shape=shape)
        mean, var = post.predict_seen(z, r, counts, shape)
        for j in range(12):
            exact_mean, exact_var = _exact_gp_prediction(prior, z, r, counts, shape, j)
            assert np.isclose(mean[j], exact_mean, atol=1e-10)
            assert np.isclose(var[j], exact_var, atol=1e-10)


def test_repeated_runs_are_predicted_with_calibrated_intervals() -> None:
    """Tasks drawn from a known prior whose programs' runs differ by a known repeat noise:
    a program that ran (1-3 times) is predicted better than from its features alone and its
    +-1 sd covers 68.3 % of a new run (4,000 predictions of 200 tasks; a task's rows are
    correlated, so a 3-point tolerance, about four standard errors of 0.7 %)."""
    prior = BlockPrior(np.array([0.04, 0.01]), np.array([0, 1, 1, 1, 1]), 0.01, 0.004)
    rng = np.random.default_rng(4)
    inside, error_seen, error_features = [], [], []
    for _ in range(200):
        z = np.column_stack([np.ones(20), rng.normal(size=(20, 4))])
        w = rng.normal(size=5) * np.sqrt(prior.column_variances)
        own = z @ w + rng.normal(size=20) * np.sqrt(prior.program_noise())
        counts = rng.integers(1, 4, size=20).astype(float)
        runs = own + rng.normal(size=20) * np.sqrt(prior.repeat_noise / counts)
        post = ResidualPosterior.fit(prior, z, runs, counts)
        mean, var = post.predict_seen(z, runs, counts)
        new_run = own + rng.normal(size=20) * np.sqrt(prior.repeat_noise)
        inside.append(np.abs(new_run - mean) <= np.sqrt(var))
        error_seen.append((new_run - mean) ** 2)
        error_features.append((new_run - post.predict(z)[0]) ** 2)
    assert abs(np.mean(inside) - 0.683) < 0.03
    assert np.mean(error_seen) < 0.8 * np.mean(error_features)


def test_repeat_noise_must_be_part_of_the_noise() -> None:
    import pytest

    with pytest.raises(ValueError, match="repeat_noise"):
        BlockPrior(np.array([0.04]), np.array([0]), 0.01, 0.01)
    with pytest.raises(ValueError, match="repeat_noise"):
        BlockPrior(np.array([0.04]), np.array([0]), 0.01, -0.001)
    with pytest.raises(ValueError, match="level_noise"):
        BlockPrior(np.array([0.04]), np.array([0]), 0.01, 0.0, -0.001)


def test_a_noise_that_grows_with_the_level_is_recovered() -> None:
    """60 tasks of 50 rows whose noise is 0.002 + 0.02 x shape (shape uniform in [0, 1]):
    the shaped part, estimated from 3,000 rows' spread against their shape, within about
    three standard errors (20 %); a fit without it lands on the mean noise in between."""
    truth = BlockPrior(np.array([0.04, 0.01]), np.array([0, 1, 1]), 0.002, 0.0, 0.02)
    rng = np.random.default_rng(5)
    tasks = []
    for _ in range(60):
        z = np.column_stack([np.ones(50), rng.normal(size=(50, 2))])
        shape = rng.uniform(size=50)
        w = rng.normal(size=3) * np.sqrt(truth.column_variances)
        noise = truth.program_noise(shape)
        tasks.append((z, z @ w + rng.normal(size=50) * np.sqrt(noise), shape))
    fitted = fit_blocks(tasks, truth.blocks, level_noise=True)
    assert abs(fitted.level_noise / truth.level_noise - 1) < 0.2, fitted
    assert abs(fitted.noise / truth.noise - 1) < 0.6, fitted
    flat = fit_blocks(tasks, truth.blocks)
    assert flat.level_noise == 0.0 and 0.008 < flat.noise < 0.016, flat
