"""The program covariance's choices: shrinkage and execution noise by held-out prediction,
and whether a residual table can teach a covariance at all."""

from __future__ import annotations

import numpy as np
import pytest

from wmrl_env.world_models.programs.program_covariance import choose_covariance, identified


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_crash_like_outliers_make_the_posterior_trust_each_anchor_less(seed):
    # 120 tasks x 24 programs: two task factors move the programs together, plus small
    # Gaussian noise; "crashes" (5 % of cells off by +-3, ten times the factors' spread)
    # break the Gaussian model. Clean residuals: the least noise predicts best; with the
    # crashes, the most noise does (an anchor that crashed must not drag its neighbours).
    rng = np.random.default_rng(seed)
    clean = 0.3 * rng.normal(size=(120, 2)) @ rng.normal(size=(2, 24))
    clean += 0.05 * rng.normal(size=clean.shape)
    crashes = np.where(rng.random(clean.shape) < 0.05, rng.choice([-3.0, 3.0], clean.shape), 0)
    folds = np.arange(120) % 4
    _, calm = choose_covariance(clean, folds, anchor_counts=(4, 8))
    _, wary = choose_covariance(clean + crashes, folds, anchor_counts=(4, 8))
    assert (calm, wary) == (0.01, 0.3)


def test_a_table_whose_tasks_all_ran_the_same_few_programs_teaches_no_covariance():
    residuals = np.random.default_rng(0).normal(size=(118, 72))
    assert identified(residuals)
    residuals[:, 20:] = np.nan  # the `wm` split: the same 20 of 72 programs on every task
    assert not identified(residuals)
    residuals[:7, 20:] = 0.0  # 7 tasks ran everything: pairs together on fewer than 8 tasks
    assert not identified(residuals)
    residuals[7, 20:] = 0.0
    assert identified(residuals)
