"""World model v4: which pretraining data and which per-task posterior learn a task from its
anchors, cross-validated on pretraining data only.

Two sets of out-of-fold prior predictions, each for two pretraining data sets (the
generated pretraining tasks alone, or with the first suite's real datasets of its ``wm``
and ``train`` splits):

* ``gen``: each generated pretraining family predicted by a prior fitted without it;
* ``task``: each generated pretraining task predicted by a prior fitted without it (its
  family's other seed stays in: the situation of the held-out generated tasks);
* ``real``: each fifth of the first suite's ``train``-split real datasets (72 grid programs
  each) predicted by a prior fitted without it (with the generated tasks only: the prior
  fitted on all of them, which never saw a real dataset).

Then each posterior design is fitted on the other folds' residuals (block variances and
noise by maximum marginal likelihood, the std scale by ±1σ coverage on them) and read on the
held-out fold: within-task Spearman with the reward, top-1 regret and ±1σ coverage after 0 /
1 / 2 / 4 random anchor groups of 8 (Spearman and regret on the programs not anchored). No
held-out task of either suite is read.

    python benchmarks/v4_posterior_designs.py --cache runs/v4_designs
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from scipy.linalg import cho_factor, cho_solve
from scipy.optimize import minimize
from scipy.stats import rankdata, spearmanr

from wmrl_env.world_models.programs.grammar_features import PROGRAM_COLUMNS
from wmrl_env.world_models.programs.open_space import LEVEL_CENTRE, LEVEL_UNIT, program_blocks
from wmrl_env.world_models.programs.open_space_build import pretraining_rows
from wmrl_env.world_models.programs.open_space_fit import (
    _fit_parts,
    _model,
    _subset,
    family_of,
    training_matrix,
)
from wmrl_env.world_models.programs.residual_regression import (
    BlockPrior,
    ResidualPosterior,
    fit_blocks,
)
from wmrl_env.world_models.programs.task_residual import ResidualPrior, TaskPosterior

GROUPS = (0, 1, 2, 4)
# the posterior of v4's previous artifact: block variances and noise from seed-fold residuals
# of the generated tasks (a new task of a known family)
BEFORE = BlockPrior(np.array([0.00414705, 0.00027288, 0.00027913, 0.00011874]),
                    program_blocks(), 0.009898954855290337)  # fmt: skip
BEFORE_SCALE = 0.7854803549387825
DESIGNS = {
    "blr, seed-fold variances (v4 before)": dict(before=True),
    "blr, empirical Bayes": dict(),
    "blr + level column, empirical Bayes": dict(level=True),
    "blr on the score given ok, empirical Bayes": dict(factored=True),
    "GP (unit length scales), empirical Bayes": dict(gp=True),
}


def predictions(cache: Path, first_suite: bool) -> dict[str, dict[str, dict]]:
    """``{"gen": {task: record}, "real": {task: record}}`` of out-of-fold predictions."""
    path = cache / f"predictions_{'first_suite' if first_suite else 'generated'}.npy"
    if path.exists():
        return np.load(path, allow_pickle=True).item()
    rows = pretraining_rows(first_suite=True)
    x = training_matrix(rows)
    ids = np.array(rows.task_ids)
    generated = np.array([t.startswith("hr_") for t in ids])
    from wmrl_env.envs.ml_tasks.registry import manifest_entry

    train_split = np.array([not g and manifest_entry(t)["split"] == "train"
                            for t, g in zip(ids, generated, strict=True)])  # fmt: skip
    tasks = sorted(set(ids[train_split]))
    fifth = {t: i % 5 for i, t in enumerate(tasks)}
    blocks = program_blocks()
    placeholder = BlockPrior(np.ones(4), blocks, 1.0)

    def fitted(inside: np.ndarray):
        use = inside if first_suite else inside & generated
        return _model(_fit_parts(x[use], _subset(rows, use), "boost_factored", 0),
                      "boost_factored", placeholder, 1.0, ())  # fmt: skip

    def record(model, members: np.ndarray) -> dict:
        expected, status, _ = model.prior(x[members])
        return dict(x=x[members], expected=expected, p_ok=status[:, 0],
                    reward=rows.reward[members], ok=np.isfinite(rows.score[members]))  # fmt: skip

    out: dict[str, dict] = {"gen": {}, "task": {}, "real": {}}
    for task in sorted(set(ids[generated])):
        out["task"][task] = record(fitted(ids != task), ids == task)
    families = np.array([family_of(t) if g else "" for t, g in zip(ids, generated, strict=True)])
    for family in sorted(set(families[generated])):
        model = fitted(families != family)
        for task in sorted(set(ids[families == family])):
            out["gen"][task] = record(model, ids == task)
    folds = np.array([fifth.get(t, -1) for t in ids])
    everything = fitted(np.ones(len(ids), dtype=bool)) if not first_suite else None
    for k in range(5):
        model = everything or fitted(folds != k)
        for task in sorted(set(ids[folds == k])):
            out["real"][task] = record(model, ids == task)
    cache.mkdir(parents=True, exist_ok=True)
    np.save(path, out, allow_pickle=True)
    return out


def _z(record: dict, design: dict) -> tuple[np.ndarray, np.ndarray]:
    program = record["x"][:, : len(PROGRAM_COLUMNS)]
    z = np.column_stack([np.ones(len(program)), (program - _Z[0]) / _Z[1]])
    blocks = program_blocks(bool(design.get("level")))
    if design.get("level"):
        z = np.column_stack([z, (record["expected"] - LEVEL_CENTRE) / LEVEL_UNIT])
    return z, blocks


_Z: tuple[np.ndarray, np.ndarray] = (np.zeros(len(PROGRAM_COLUMNS)), np.ones(len(PROGRAM_COLUMNS)))


def _target(record: dict, design: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(base, residual, rows the residual is learned on)."""
    if design.get("factored"):
        base = np.clip(record["expected"] / np.maximum(record["p_ok"], 0.05), 0, 1)
        return base, record["reward"] - base, record["ok"]
    every = np.ones(len(record["reward"]), dtype=bool)
    return record["expected"], record["reward"] - record["expected"], every


def fit_design(records: list[dict], design: dict):
    if design.get("before"):
        return BEFORE
    data = []
    for record in records:
        z, blocks = _z(record, design)
        _, r, use = _target(record, design)
        data.append((z[use], r[use]))
    if design.get("gp"):
        return _fit_gp([(z[:, 1:], r) for z, r in data], blocks[1:] - 1)
    return fit_blocks(data, blocks)


def _fit_gp(data: list[tuple[np.ndarray, np.ndarray]], blocks: np.ndarray, limit: int = 60):
    """A :class:`ResidualPrior` with unit inverse length scales; its variances (bias, an RBF
    over every column, one RBF per block, noise) by maximum marginal likelihood."""
    kernels = []
    for x, r in data[:limit]:
        squared = (x[:, None, :] - x[None, :, :]) ** 2
        whole = np.exp(-squared.sum(2) / (2 * x.shape[1]))
        parts = [np.exp(-squared[:, :, blocks == b].sum(2) / (2 * (blocks == b).sum()))
                 for b in range(blocks.max() + 1)]  # fmt: skip
        kernels.append((whole, parts, r))
    n_blocks = blocks.max() + 1
    total = float(np.mean(np.concatenate([r for _, _, r in kernels]) ** 2))

    def loss(theta: np.ndarray) -> float:
        v = np.exp(theta) * total
        out = 0.0
        for whole, parts, r in kernels:
            K = v[0] + v[1] * whole + sum(v[3 + b] * parts[b] for b in range(n_blocks))
            try:
                factor = cho_factor(K + v[2] * np.eye(len(r)), lower=True)
            except np.linalg.LinAlgError:
                return 1e12
            out += 0.5 * (r @ cho_solve(factor, r)) + np.log(np.diag(factor[0])).sum()
        return out

    start = np.log(np.array([0.1, 0.1, 0.5] + [0.1] * n_blocks))
    bounds = [(np.log(1e-4), np.log(10.0))] * (3 + n_blocks)
    v = np.exp(minimize(loss, start, method="L-BFGS-B", bounds=bounds,
                        options={"maxiter": 80}).x) * total  # fmt: skip
    return ResidualPrior(v[0], v[1], max(v[2], 1e-6), np.ones(len(blocks)), blocks, v[3:])


def _predict(record: dict, prior, design: dict, anchors: np.ndarray, rest: np.ndarray):
    z, _ = _z(record, design)
    base, r, use = _target(record, design)
    taught = anchors[use[anchors]]
    if design.get("gp"):
        x = z[:, 1:]
        if len(taught):
            mean, variance = TaskPosterior.fit(prior, x[taught], r[taught]).predict(x[rest])
        else:
            mean, variance = np.zeros(len(rest)), np.full(len(rest), prior.total)
    else:
        posterior = (ResidualPosterior.fit(prior, z[taught], r[taught]) if len(taught)
                     else ResidualPosterior.empty(prior))  # fmt: skip
        mean, variance = posterior.predict(z[rest])
    if design.get("factored"):
        p = record["p_ok"][rest]
        score = np.clip(base[rest] + mean, 0, 1)
        return p * score, np.sqrt(p**2 * variance + p * (1 - p) * score**2)
    return np.clip(base[rest] + mean, 0, 1), np.sqrt(variance)


def read(records: list[dict], prior, design: dict, draws: int, scale: float, seed: int = 0):
    rng = np.random.default_rng(seed)
    figures: dict[str, list] = {}
    ratios = []
    for record in records:
        n = len(record["reward"])
        for g in GROUPS:
            for _ in range(draws if g else 1):
                order = rng.permutation(n)
                anchors, rest = order[: g * 8], np.sort(order[g * 8 :])
                mean, std = _predict(record, prior, design, anchors, rest)
                y = record["reward"][rest]
                if np.ptp(y) > 0:
                    figures.setdefault(f"rho@{g}", []).append(
                        spearmanr(rankdata(mean), y).statistic)  # fmt: skip
                figures.setdefault(f"regret@{g}", []).append(y.max() - y[np.argmax(mean)])
                ratio = np.abs(y - mean) / std
                figures.setdefault(f"cov@{g}", []).append(np.mean(ratio <= scale))
                ratios.append(ratio)
    out = {k: float(np.mean(v)) for k, v in figures.items()}
    out["scale"] = float(np.quantile(np.concatenate(ratios), 0.6827))
    return out


def cross_validate(data: dict, design: dict, draws: int) -> dict:
    out = {}
    for part in ("gen", "task", "real"):
        tasks = sorted(t for t, r in data[part].items() if len(r["reward"]) >= 64)
        key = {"gen": family_of, "task": lambda t: t,
               "real": lambda t, order=tasks: order.index(t) % 5}[part]  # fmt: skip
        results = []
        for fold in sorted({key(t) for t in tasks}):
            train = [data[part][t] for t in tasks if key(t) != fold]
            test = [data[part][t] for t in tasks if key(t) == fold]
            prior = fit_design(train, design)
            scale = (
                BEFORE_SCALE
                if design.get("before")
                else read(train[::4] if part == "real" else train, prior, design, 3, 1.0)["scale"]
            )
            results.append((len(test), read(test, prior, design, draws, scale)))
        total = sum(n for n, _ in results)
        out[part] = {k: sum(n * f[k] for n, f in results) / total for k in results[0][1]}
    return out


def main() -> None:
    global _Z
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=Path("runs/v4_designs"))
    parser.add_argument("--draws", type=int, default=20)
    parser.add_argument("--designs", nargs="*", default=list(DESIGNS))
    args = parser.parse_args()
    from wmrl_env.world_models.programs.open_space_fit import space_standardisation

    _Z = space_standardisation()  # v4's standardisation of the program columns
    print("| pretraining | posterior | held out | Spearman 0 / 1 / 2 / 4 groups | regret | ±1σ |")
    print("|---|---|---|---|---|---|")
    for first_suite in (False, True):
        data = predictions(args.cache, first_suite)
        for name in args.designs:
            figures = cross_validate(data, DESIGNS[name], args.draws)
            for part, f in figures.items():
                cells = [" / ".join(f"{f[f'{m}@{g}']:.3f}" for g in GROUPS)
                         for m in ("rho", "regret", "cov")]  # fmt: skip
                source = "generated + first suite" if first_suite else "generated"
                where = {"gen": "a generated family", "task": "a generated task",
                         "real": "a fifth of the real datasets"}[part]  # fmt: skip
                print(f"| {source} | {name} | {where} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
