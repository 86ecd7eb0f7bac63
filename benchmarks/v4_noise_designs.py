"""World model v4's posterior noise: one variance for every program, one that grows toward
the middle of the reward range (``4 e (1 - e)`` of the prior's expected reward ``e``), or a
program's own deviation correlated between similar programs (a kernel over the program
features), cross-validated on pretraining tasks only.

Every pretraining task's programs are predicted by a prior fitted without the task's fold
(a generated family, or a fifth of the first suite's real datasets:
:func:`~wmrl_env.world_models.programs.open_space_fit.out_of_fold_residuals`). Then, leaving
out one fold at a time, each design's variances are fitted on the other folds' residuals
(maximum marginal likelihood), its std scale chosen on them (±1σ covering 68.3 % after 0 / 1
/ 2 / 4 random anchor groups), and the held-out fold is read:

* ``random``: 0 / 1 / 2 / 4 random anchor groups of 8; within-task Spearman of the predicted
  reward with the reward and ±1σ coverage, on the programs not anchored;
* ``on-policy``: 1 / 2 / 4 / 8 groups drawn, with repeats, from a softmax policy
  concentrated on a few good programs (``program_profile.on_policy_draw``), then one more
  such group: ±1σ coverage on its programs that were not anchored (the programs a policy
  proposes that are new to the task; the ones it repeats are answered from their runs).

The linear designs take the repeat noise
:data:`~wmrl_env.world_models.programs.open_space_fit.REPEAT_NOISE`; the kernel design
treats every run as a new draw of the independent noise. No held-out task of either suite is
read.

    python benchmarks/v4_noise_designs.py --draws 10 --out runs/v4_noise_designs.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from scipy.optimize import minimize
from scipy.stats import spearmanr

from wmrl_env.world_models.programs.open_space import program_blocks
from wmrl_env.world_models.programs.open_space_build import pretraining_rows
from wmrl_env.world_models.programs.open_space_fit import (
    REPEAT_NOISE,
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


class LinearNoise:
    """The committed posterior (independent noise), or with ``level_noise`` a noise that
    grows toward the middle of the reward range."""

    def __init__(self, level_noise: bool) -> None:
        self.level_noise = level_noise

    def fit(self, tasks) -> LinearNoise:
        train = [(t.z, t.residual, noise_shape(t.expected)) for t in tasks]
        self.prior = fit_blocks(train, program_blocks(True), self.level_noise, REPEAT_NOISE)
        return self

    def predict(self, task, anchors, counts, rest) -> tuple[np.ndarray, np.ndarray]:
        if len(anchors):
            posterior = ResidualPosterior.fit(
                self.prior, task.z[anchors], task.residual[anchors], counts.astype(float),
                shape=noise_shape(task.expected[anchors]),
            )  # fmt: skip
        else:
            posterior = ResidualPosterior.empty(self.prior)
        return posterior.predict(task.z[rest], noise_shape(task.expected[rest]))


class KernelNoise:
    """The same linear part plus a program's own deviation correlated between programs
    whose standardised features are close: ``tc exp(-d^2 / 2 ell^2)`` (``d`` over the program
    columns, divided by the square root of their number) beside an independent ``ti``; the
    three fitted by maximum marginal likelihood (the Gaussian process in function space)."""

    def fit(self, tasks) -> KernelNoise:
        prior = fit_blocks([(t.z, t.residual) for t in tasks], program_blocks(True))
        self.v = prior.column_variances

        def loss(theta: np.ndarray) -> float:
            self.tc, self.ti, self.ell = np.exp(theta)
            total = 0.0
            for t in tasks:
                chol = np.linalg.cholesky(self._k(t.z, t.z) + self.ti * np.eye(len(t.residual)))
                a = np.linalg.solve(chol, t.residual)
                total += 0.5 * a @ a + np.log(np.diag(chol)).sum()
            return total

        start = np.log([prior.noise / 2, prior.noise / 2, 1.0])
        best = minimize(loss, start, method="L-BFGS-B", bounds=[(-18, 2)] * 3,
                        options={"maxiter": 60})  # fmt: skip
        self.tc, self.ti, self.ell = np.exp(best.x)
        return self

    def _k(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        pa, pb = (x[:, 1:-1] / np.sqrt(x.shape[1] - 2) for x in (a, b))
        d2 = (pa**2).sum(1)[:, None] + (pb**2).sum(1)[None, :] - 2 * pa @ pb.T
        return (a * self.v) @ b.T + self.tc * np.exp(-np.maximum(d2, 0) / (2 * self.ell**2))

    def predict(self, task, anchors, counts, rest) -> tuple[np.ndarray, np.ndarray]:
        z = task.z[rest]
        own = (z**2) @ self.v + self.tc + self.ti
        if not len(anchors):
            return np.zeros(len(rest)), own
        za = task.z[anchors]
        k = self._k(za, za) + np.diag(self.ti / counts)
        cross = self._k(z, za)
        solved = np.linalg.solve(k, cross.T)
        return solved.T @ task.residual[anchors], own - np.einsum("ij,ji->i", cross, solved)


def std_scale(design, tasks, rng: np.random.Generator) -> float:
    """The scale at which ±1σ covers 68.3 % after 0 / 1 / 2 / 4 random groups (5 draws)."""
    ratios = []
    for task in tasks:
        n = len(task.residual)
        for g in RANDOM_GROUPS:
            for _ in range(5 if g else 1):
                anchors = rng.permutation(n)[: min(g * GROUP, n - 2)]
                rest = np.setdiff1d(np.arange(n), anchors)
                mean, variance = design.predict(task, anchors, np.ones(len(anchors)), rest)
                ratios.append(np.abs(task.residual[rest] - mean) / np.sqrt(variance))
    return float(np.quantile(np.concatenate(ratios), 0.6827))


def read_fold(design, scale: float, tasks, draws: int, rng: np.random.Generator) -> dict:
    """The held-out fold's figures (see the module doc), pooled over its tasks."""
    figures: dict[str, list] = {}
    for task in tasks:
        n = len(task.residual)
        for g in RANDOM_GROUPS:
            for _ in range(draws if g else 1):
                anchors = rng.permutation(n)[: min(g * GROUP, n - 2)]
                rest = np.setdiff1d(np.arange(n), anchors)
                mean, variance = design.predict(task, anchors, np.ones(len(anchors)), rest)
                truth = task.expected[rest] + task.residual[rest]
                if np.ptp(truth) > 0:
                    rho = spearmanr(task.expected[rest] + mean, truth).statistic
                    figures.setdefault(f"random spearman@{g}", []).append(rho)
                inside = np.abs(task.residual[rest] - mean) <= scale * np.sqrt(variance)
                figures.setdefault(f"random coverage@{g}", []).extend(inside)
        reward = task.expected + task.residual
        for g in POLICY_GROUPS:
            for _ in range(draws):
                drawn = on_policy_draw(reward, (g + 1) * GROUP, rng)
                anchors, counts = np.unique(drawn[: g * GROUP], return_counts=True)
                new = np.setdiff1d(drawn[g * GROUP :], anchors)
                if not len(new):
                    continue
                mean, variance = design.predict(task, anchors, counts.astype(float), new)
                inside = np.abs(task.residual[new] - mean) <= scale * np.sqrt(variance)
                figures.setdefault(f"on-policy coverage@{g}", []).extend(inside)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=10)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    rows = pretraining_rows()
    residuals = out_of_fold_residuals(rows, training_matrix(rows), "boost_factored")
    fold_of = dict(zip(rows.task_ids, residual_folds_of(rows.task_ids), strict=True))
    designs = {
        "one noise": lambda: LinearNoise(level_noise=False),
        "noise grows toward the middle": lambda: LinearNoise(level_noise=True),
        "a kernel over programs": KernelNoise,
    }
    report = {}
    for name, make in designs.items():
        pooled: dict[str, list] = {}
        for fold in sorted(set(fold_of.values())):
            train = [r for t, r in residuals.items() if fold_of[t] != fold]
            design = make().fit(train)
            scale = std_scale(design, train, np.random.default_rng(1))
            held = [r for t, r in residuals.items() if fold_of[t] == fold]
            for figure, values in read_fold(design, scale, held, args.draws,
                                            np.random.default_rng(2)).items():  # fmt: skip
                pooled.setdefault(figure, []).extend(values)
        report[name] = {figure: float(np.nanmean(v)) for figure, v in sorted(pooled.items())}
        print(name, json.dumps({k: round(v, 3) for k, v in report[name].items()}), flush=True)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
