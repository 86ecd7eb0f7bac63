"""Fitting world model v4 on a pretraining pool table, and measuring it on tasks it did not
see.

:func:`fit_open_space` fits the status model, the reward prior of one design
(:data:`~.open_space.DESIGNS`), the posterior's block variances (maximum marginal
likelihood on out-of-fold residuals: each seed's tasks, or each family's, predicted by a
prior fitted without them) and the std scale (±1σ covering 68 % of those residuals around the
posterior given 0 to 4 random anchor groups). :func:`evaluate_task` reads a fitted model on
one task's executions: within-task Spearman against the reward zero-shot and after anchor
groups, ±1σ coverage, failure AUC and status accuracy.

Example:
    >>> from wmrl_env.world_models.programs.open_space_data import (
    ...     default_pretraining_table, pool_training_rows)
    >>> rows = pool_training_rows(default_pretraining_table(),
    ...                           tasks=["hr_missing_s1", "hr_periodic_s2", "hr_outliers_s1"])
    >>> model = fit_open_space(rows, "ridge")
    >>> model.design, model.std_scale > 0
    ('ridge', True)
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from wmrl_env.world_models.programs.grammar_features import (
    PROGRAM_COLUMNS,
    parse_program,
    program_vector,
)
from wmrl_env.world_models.programs.open_space import (
    OpenSpaceWorldModel,
    feature_row,
    program_blocks,
    status_columns,
)
from wmrl_env.world_models.programs.open_space_data import TrainingRows
from wmrl_env.world_models.programs.open_space_tasks import task_vector
from wmrl_env.world_models.programs.pretraining import fit_booster, one_thread
from wmrl_env.world_models.programs.residual_regression import (
    BlockPrior,
    ResidualPosterior,
    fit_blocks,
)
from wmrl_env.world_models.programs.status_model import StatusModel

__all__ = ["ANCHOR_GROUPS", "GROUP_SIZE", "evaluate_task", "family_of", "fit_open_space",
           "training_matrix"]  # fmt: skip

GROUP_SIZE = 8
ANCHOR_GROUPS = (0, 1, 2, 4)
"""Anchor groups of :data:`GROUP_SIZE` random programs the std is calibrated over."""
COVERAGE = 0.6827
REPEAT_NOISE = 0.0045
"""Variance of the reward between two real runs of the same program on the same task in the
pool suite's sandbox: 192 executions of the pretraining table (32 programs on its six seed-1
tasks) run again (``benchmarks/pool_repeat_noise.py``); every pair that ran ok twice reported
the same metric, 4 runs that had timed out finished (half the squared difference of the
rewards, averaged)."""
STATUS_INPUTS: tuple[str, ...] = ("nan_refused",)
"""The status model's columns beside the feature row
(:data:`~.open_space.STATUS_COLUMNS`), chosen on pretraining folds only
(``benchmarks/v4_status_designs.py``)."""


def family_of(task_id: str) -> str:
    """``hr_<family>_s<seed>`` -> family."""
    return task_id[3:].rsplit("_s", 1)[0]


def seed_of(task_id: str) -> str:
    """``hr_<family>_s<seed>`` -> seed."""
    return task_id.rsplit("_s", 1)[1]


@functools.cache
def space_standardisation(n: int = 3000, seed: int = 77) -> tuple[np.ndarray, np.ndarray]:
    """Mean and std of the program columns over ``n`` programs drawn uniformly from the open
    space (no score read): the posterior's standardisation, so that a program off the
    pretraining tables' grid is as far from the mean as it is in the space, not as far as
    from the grid's few values."""
    from wmrl_env.envs.ml_tasks.grammar import sample_programs

    kinds = ("binary", "multiclass", "regression")
    program = np.array([
        program_vector(parse_program(p.render(kinds[i % 3])))
        for i, p in enumerate(sample_programs(n, seed))
    ])  # fmt: skip
    scale = program.std(axis=0)
    return program.mean(axis=0), np.where(scale > 0, scale, 1.0)


def training_matrix(rows: TrainingRows) -> np.ndarray:
    """Feature rows of the executions (every program of the grammar parses)."""
    tasks = {d: task_vector(d) for d in set(rows.descriptions)}
    return np.array([
        feature_row(program_vector(parse_program(p)), tasks[d])
        for d, p in zip(rows.descriptions, rows.programs, strict=True)
    ])  # fmt: skip


@dataclass
class _Parts:
    status: StatusModel
    reward: object
    z_mean: np.ndarray
    z_scale: np.ndarray
    status_inputs: tuple[str, ...] = ()


def _fit_parts(
    x: np.ndarray,
    rows: TrainingRows,
    design: str,
    seed: int,
    status: StatusModel | None = None,
    status_inputs: Sequence[str] = STATUS_INPUTS,
) -> _Parts:
    program = x[:, : len(PROGRAM_COLUMNS)]
    z_mean, z_scale = space_standardisation()
    if status is None:
        with one_thread():
            status = StatusModel(min_count=5, seed=seed).fit(
                status_columns(x, status_inputs), rows.labels
            )
    reward = rows.reward
    with one_thread():
        if design == "ridge":
            from sklearn.linear_model import Ridge

            fitted = Ridge(alpha=10.0).fit((program - z_mean) / z_scale, reward)
            model = (float(fitted.intercept_), fitted.coef_.astype(np.float64))
        elif design == "boost_reward":
            model = fit_booster(x, reward, seed=seed)
        else:
            ok = np.isfinite(rows.score)
            model = fit_booster(x[ok], rows.score[ok], seed=seed)
    return _Parts(status, model, z_mean, z_scale, tuple(status_inputs))


def _model(
    parts: _Parts, design: str, prior: BlockPrior, scale: float, tasks, level: bool = False
) -> OpenSpaceWorldModel:
    return OpenSpaceWorldModel(
        design=design, status_model=parts.status, reward=parts.reward, z_mean=parts.z_mean,
        z_scale=parts.z_scale, residual_prior=prior, std_scale=scale, pretraining_tasks=tasks,
        level_column=level, status_inputs=parts.status_inputs,
    )  # fmt: skip


def _subset(rows: TrainingRows, mask: np.ndarray) -> TrainingRows:
    pick = np.flatnonzero(mask)
    return TrainingRows(
        tuple(rows.task_ids[i] for i in pick), tuple(rows.descriptions[i] for i in pick),
        tuple(rows.programs[i] for i in pick), tuple(rows.labels[i] for i in pick),
        rows.score[pick],
    )  # fmt: skip


def _anchor_draws(n: int, groups: int, draws: int, rng: np.random.Generator) -> list[np.ndarray]:
    size = min(groups * GROUP_SIZE, n - 1)
    return [rng.permutation(n)[:size] for _ in range(draws if groups else 1)]


def residual_folds_of(task_ids: Sequence[str], scheme: str = "family") -> np.ndarray:
    """The fold of each task for the out-of-fold residuals: a generated task's seed
    (``scheme="seed"``) or family (``"family"``); any other task (the first suite's real
    datasets) one of five folds by its rank among those tasks."""
    if scheme not in ("seed", "family"):
        raise ValueError(f"residual_folds must be 'seed' or 'family', got {scheme!r}")
    others = sorted({t for t in task_ids if not t.startswith("hr_")})
    rank = {t: i for i, t in enumerate(others)}
    key = seed_of if scheme == "seed" else family_of
    return np.array([
        key(t) if t.startswith("hr_") else f"table_{rank[t] % 5}" for t in task_ids
    ])  # fmt: skip


@dataclass(frozen=True)
class OutOfFold:
    """One pretraining task's programs as a prior fitted without its fold predicts them."""

    z: np.ndarray
    residual: np.ndarray
    expected: np.ndarray


def out_of_fold_residuals(
    rows: TrainingRows,
    x: np.ndarray,
    design: str,
    residual_folds: str = "family",
    level_column: bool = True,
    seed: int = 0,
    status_inputs: Sequence[str] = STATUS_INPUTS,
) -> dict[str, OutOfFold]:
    """Per task, its programs (feature rows ``x``) predicted by a prior fitted without the
    task's fold (:func:`residual_folds_of`)."""
    task_ids = np.array(rows.task_ids)
    folds = residual_folds_of(rows.task_ids, residual_folds)
    blocks = program_blocks(level_column)
    placeholder = BlockPrior(np.ones(int(blocks.max()) + 1), blocks, 1.0)
    residuals: dict[str, OutOfFold] = {}
    for fold in np.unique(folds):
        inside = folds != fold
        if not inside.any():
            continue
        parts = _fit_parts(
            x[inside], _subset(rows, inside), design, seed, status_inputs=status_inputs
        )
        fold_model = _model(parts, design, placeholder, 1.0, (), level_column)
        for task in np.unique(task_ids[~inside]):
            members = task_ids == task
            expected, _, _ = fold_model.prior(x[members])
            residuals[task] = OutOfFold(
                fold_model.z_rows(x[members], expected),
                rows.reward[members] - expected,
                expected,
            )
    if len(residuals) < 2:
        raise ValueError(
            "fitting v4 needs pretraining tasks of two folds (two seeds, or two families "
            "with residual_folds='family')"
        )
    return residuals


def fit_open_space(
    rows: TrainingRows,
    design: str = "boost_factored",
    *,
    residual_folds: str = "family",
    level_column: bool = True,
    seed: int = 0,
    draws: int = 10,
    status_inputs: Sequence[str] = STATUS_INPUTS,
    repeat_noise: float = REPEAT_NOISE,
) -> OpenSpaceWorldModel:
    """World model v4 of ``design`` fitted on ``rows`` (see the module doc); the residuals
    behind the posterior's prior and the std come from leaving out one fold of tasks at a
    time: one family's generated tasks (``residual_folds="family"``: the situation of a task
    unlike any seen) or one seed's (``"seed"``: each task predicted with its family's other
    seeds in training), and a fifth of any other tasks (:func:`residual_folds_of`).
    ``level_column``: the posterior also reads the prior's expected reward;
    ``status_inputs``: the status model's columns beside the feature row;
    ``repeat_noise``: the variance of a repeated real run's reward (:data:`REPEAT_NOISE`)."""
    x = training_matrix(rows)
    residuals = out_of_fold_residuals(
        rows, x, design, residual_folds, level_column, seed, status_inputs
    )
    blocks = program_blocks(level_column)
    pairs = [(r.z, r.residual) for r in residuals.values()]
    prior = fit_blocks(pairs, blocks, repeat_noise=repeat_noise)
    scale = coverage_scale(prior, pairs, draws, np.random.default_rng(seed))
    parts = _fit_parts(x, rows, design, seed, status_inputs=status_inputs)
    return _model(parts, design, prior, scale, tuple(sorted(set(rows.task_ids))), level_column)


def coverage_scale(
    prior: BlockPrior,
    residuals: Sequence[tuple[np.ndarray, np.ndarray]],
    draws: int,
    rng: np.random.Generator,
) -> float:
    """The std scale at which ±1σ covers :data:`COVERAGE` of the tasks' ``(z, residual)``
    around the posterior after :data:`ANCHOR_GROUPS` random anchor groups (on the programs
    not anchored)."""
    ratios = []
    for z, r in residuals:
        for groups in ANCHOR_GROUPS:
            for anchors in _anchor_draws(len(r), groups, draws, rng):
                rest = np.setdiff1d(np.arange(len(r)), anchors)
                posterior = (
                    ResidualPosterior.fit(prior, z[anchors], r[anchors])
                    if len(anchors)
                    else ResidualPosterior.empty(prior)
                )
                mean, variance = posterior.predict(z[rest])
                ratios.append(np.abs(r[rest] - mean) / np.sqrt(variance))
    return float(np.quantile(np.concatenate(ratios), COVERAGE))


def evaluate_task(
    model: OpenSpaceWorldModel,
    rows: TrainingRows,
    *,
    groups: Sequence[int] = ANCHOR_GROUPS,
    draws: int = 20,
    seed: int = 0,
) -> dict[str, float]:
    """Figures of ``model`` on one task's executions ``rows`` (the model's anchors of that
    task are reset before and after): ``spearman@G`` (G anchor groups of 8 random programs,
    on the programs not anchored, mean over ``draws``), ``regret@G`` (the best reward among
    the programs not anchored minus the reward of the one the model ranks first),
    ``coverage@G`` (±1σ), ``failure_auc``, ``status_accuracy``."""
    from scipy.stats import rankdata, spearmanr
    from sklearn.metrics import roc_auc_score

    from wmrl_env.world_models.outcomes import STATUSES

    contexts, programs = list(rows.descriptions), list(rows.programs)
    reward = rows.reward
    model.reset_task(contexts[0])
    outcome = model.predict_outcomes(contexts, programs)
    failed = np.array([label != "ok" for label in rows.labels])
    truth = np.array([label.split(":")[0] for label in rows.labels])
    figures: dict[str, float] = {
        "programs": float(len(programs)),
        "failure_auc": (
            float(roc_auc_score(failed, outcome.p_fail))
            if 0 < failed.sum() < len(failed)
            else float("nan")
        ),
        "status_accuracy": float(np.mean(outcome.status() == truth)),
        "failures": float(failed.sum()),
    }
    assert set(truth) <= set(STATUSES)
    rng = np.random.default_rng(seed)
    for g in groups:
        rhos, covered, regrets = [], [], []
        for anchors in _anchor_draws(len(programs), g, draws, rng):
            model.reset_task(contexts[0])
            if len(anchors):
                model.update([contexts[i] for i in anchors], [programs[i] for i in anchors],
                             reward[anchors])  # fmt: skip
            rest = np.setdiff1d(np.arange(len(programs)), anchors)
            p = model.predict([contexts[i] for i in rest], [programs[i] for i in rest])
            if np.ptp(reward[rest]) > 0:
                rhos.append(spearmanr(rankdata(p.scores), reward[rest]).statistic)
            covered.append(np.mean(np.abs(reward[rest] - p.scores) <= p.std))
            regrets.append(reward[rest].max() - reward[rest][np.argmax(p.scores)])
        figures[f"spearman@{g}"] = float(np.mean(rhos)) if rhos else float("nan")
        figures[f"regret@{g}"] = float(np.mean(regrets))
        figures[f"coverage@{g}"] = float(np.mean(covered))
    model.reset_task(contexts[0])
    return figures
