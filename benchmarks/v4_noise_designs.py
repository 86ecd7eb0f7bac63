"""World model v4's posterior noise: one variance for every program, or one that grows
toward the middle of the reward range (``4 e (1 - e)`` of the prior's expected reward ``e``),
cross-validated on pretraining tasks only.

Every pretraining task's programs are predicted by a prior fitted without the task's fold
(a generated family, or a fifth of the first suite's real datasets:
:func:`~wmrl_env.world_models.programs.open_space_fit.out_of_fold_residuals`). Then, leaving
out one fold at a time, each design's block variances and noise are fitted on the other
folds' residuals (maximum marginal likelihood), its std scale chosen on them (±1σ covering
68.3 % after 0 / 1 / 2 / 4 random anchor groups), and the held-out fold is read:

* ``random``: 0 / 1 / 2 / 4 random anchor groups of 8; within-task Spearman of the predicted
  reward with the reward and ±1σ coverage, on the programs not anchored;
* ``on-policy``: 1 / 2 / 4 / 8 groups drawn, with repeats, from a softmax policy
  concentrated on a few good programs (``program_profile.on_policy_draw``), then one more
  such group: ±1σ coverage on its programs that were not anchored (the programs a policy
  proposes that are new to the task; the ones it repeats are answered from their runs).

The repeat noise is :data:`~wmrl_env.world_models.programs.open_space_fit.REPEAT_NOISE` in
both designs. No held-out task of either suite is read.

    python benchmarks/v4_noise_designs.py --draws 10 --out runs/v4_noise_designs.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from wmrl_env.world_models.programs.open_space import program_blocks
from wmrl_env.world_models.programs.open_space_build import pretraining_rows
from wmrl_env.world_models.programs.open_space_fit import (
    REPEAT_NOISE,
    coverage_scale,
    out_of_fold_residuals,
    residual_folds_of,
    training_matrix,
)
from wmrl_env.world_models.programs.program_profile import on_policy_draw
from wmrl_env.world_models.programs.residual_regression import ResidualPosterior, fit_blocks

RANDOM_GROUPS = (0, 1, 2, 4)
POLICY_GROUPS = (1, 2, 4, 8)
GROUP = 8


def noise_shape(expected: np.ndarray) -> np.ndarray:
    """``4 e (1 - e)`` of the prior's expected reward: 1 mid-range, 0 at its ends."""
    e = np.clip(expected, 0.0, 1.0)
    return 4.0 * e * (1.0 - e)


def read_fold(prior, scale: float, tasks, draws: int, rng: np.random.Generator) -> dict:
    """The held-out fold's figures (see the module doc), pooled over its tasks."""
    figures: dict[str, list] = {}
    for task in tasks:
        n = len(task.residual)
        for g in RANDOM_GROUPS:
            for _ in range(draws if g else 1):
                anchors = rng.permutation(n)[: min(g * GROUP, n - 2)]
                rest = np.setdiff1d(np.arange(n), anchors)
                mean, std = _predict(prior, scale, task, anchors, np.ones(len(anchors)), rest)
                truth = task.expected[rest] + task.residual[rest]
                if np.ptp(truth) > 0:
                    rho = spearmanr(task.expected[rest] + mean, truth).statistic
                    figures.setdefault(f"random spearman@{g}", []).append(rho)
                inside = np.abs(task.residual[rest] - mean) <= std
                figures.setdefault(f"random coverage@{g}", []).extend(inside)
        reward = task.expected + task.residual
        for g in POLICY_GROUPS:
            for _ in range(draws):
                drawn = on_policy_draw(reward, (g + 1) * GROUP, rng)
                anchors, counts = np.unique(drawn[: g * GROUP], return_counts=True)
                new = np.setdiff1d(drawn[g * GROUP :], anchors)
                if not len(new):
                    continue
                mean, std = _predict(prior, scale, task, anchors, counts, new)
                inside = np.abs(task.residual[new] - mean) <= std
                figures.setdefault(f"on-policy coverage@{g}", []).extend(inside)
    return figures


def _predict(prior, scale, task, anchors, counts, rest):
    if len(anchors):
        posterior = ResidualPosterior.fit(
            prior, task.z[anchors], task.residual[anchors], counts.astype(float),
            shape=noise_shape(task.expected[anchors]),
        )  # fmt: skip
    else:
        posterior = ResidualPosterior.empty(prior)
    mean, variance = posterior.predict(task.z[rest], noise_shape(task.expected[rest]))
    return mean, scale * np.sqrt(variance)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=10)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    rows = pretraining_rows()
    residuals = out_of_fold_residuals(rows, training_matrix(rows), "boost_factored")
    fold_of = dict(zip(rows.task_ids, residual_folds_of(rows.task_ids), strict=True))
    blocks = program_blocks(True)
    report = {}
    for design, level_noise in (("one noise", False), ("noise grows toward the middle", True)):
        pooled: dict[str, list] = {}
        for fold in sorted(set(fold_of.values())):
            train = [(r.z, r.residual, noise_shape(r.expected)) for t, r in residuals.items()
                     if fold_of[t] != fold]  # fmt: skip
            prior = fit_blocks(train, blocks, level_noise, REPEAT_NOISE)
            scale = coverage_scale(prior, train, 5, np.random.default_rng(1))
            held = [r for t, r in residuals.items() if fold_of[t] == fold]
            for name, values in read_fold(prior, scale, held, args.draws,
                                          np.random.default_rng(2)).items():  # fmt: skip
                pooled.setdefault(name, []).extend(values)
        report[design] = {name: float(np.nanmean(v)) for name, v in sorted(pooled.items())}
        print(design, json.dumps({k: round(v, 3) for k, v in report[design].items()}), flush=True)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
