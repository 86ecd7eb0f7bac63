"""How v3's task profile could learn from anchors: alternatives compared on score matrices.

    PYTHONPATH=. python benchmarks/profile_methods.py [--methods gp,gp_eb,...] [--repeats 3]

Builds, once, the pretraining tasks' (``wm`` and ``train``) out-of-task boosting level of
every grid program (4 folds by task) and the held-out tasks' level from the booster fitted
on all pretraining tasks (v3's pretrained level), then compares ways to turn anchors (groups
of 8 real results, ``uniform`` or ``on_policy`` as in ``bench_world_models.py anchors``)
into a ranking of the task's other programs: the Gaussian posterior through the learned
covariance (``gp``, v3; ``gp_s*_n*``: other shrinkage / noise share), the same with a
per-task prior scale and noise chosen by the anchors' marginal likelihood (``gp_eb``,
empirical Bayes), kernel-weighted matching of pretraining tasks by their residual profile
on the anchored programs (``knn``, collaborative filtering), half of each (``mix``), a
low-rank-plus-diagonal covariance (``rank10``, a factor model), a task-wide bias kernel
(``bias``), and a reference line that no method can reach: the covariance fitted on the
held-out tasks themselves (``oracle``). Selection uses ``CV`` lines only (4 folds of the 77
``train`` tasks, each scored with everything else in ``wm,train`` fitted); ``HO`` lines are
the 39 held-out tasks. Each cell: within-task Spearman / top-1 regret on the programs that
were not anchors, ``u``/``o`` = uniform / on-policy, then the number of groups.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np
from scipy.linalg import cho_factor, cho_solve
from scipy.stats import spearmanr

GROUPS = (0, 1, 2, 4, 8)


def score_matrices() -> dict:
    """Real scores and pretrained levels, tasks x 72 grid programs (NaN: not run)."""
    from wmrl_env.world_models.programs.ml_default import (
        new_ml_world_model,
        pretraining_tasks,
        table_training_pairs,
    )
    from wmrl_env.world_models.programs.pretraining import fit_booster, one_thread
    from wmrl_env.world_models.text import text_key

    model = new_ml_world_model("v3")
    fit_tasks = pretraining_tasks("wm,train")
    model.fit(*table_training_pairs(fit_tasks))

    def matrices(tasks: tuple[str, ...], out_of_task: bool) -> tuple[np.ndarray, np.ndarray]:
        contexts, programs, y = table_training_pairs(tasks)
        rows, _ = model.rows(list(contexts), programs)
        weights, _ = model._placement(rows, [text_key(p) for p in programs])
        label = weights.argmax(axis=1)
        task = np.unique(np.array(contexts, dtype=object), return_inverse=True)[1]
        with one_thread():
            if out_of_task:
                folds = np.arange(task.max() + 1) % 4
                np.random.default_rng(0).shuffle(folds)
                level = np.empty(len(y))
                for f in range(4):
                    held = folds[task] == f
                    level[held] = fit_booster(rows[~held], y[~held], seed=0).predict(rows[held])
            else:
                level = model._level.predict(rows)
        real = np.full((task.max() + 1, 72), np.nan)
        pretrained = real.copy()
        real[task, label], pretrained[task, label] = y, level
        return real, pretrained

    pre = matrices(fit_tasks, out_of_task=True)
    held = matrices(pretraining_tasks("heldout"), out_of_task=False)
    return {"pre": pre, "held": held, "attributes": model._attribute_matrix()}


def gp_mean(cov: np.ndarray, mean: np.ndarray, noise: float, idx, residual, counts) -> np.ndarray:
    gram = cov[np.ix_(idx, idx)] + np.diag(noise / counts)
    return mean + cov[:, idx] @ cho_solve(cho_factor(gram, lower=True), residual - mean[idx])


def methods(attributes: np.ndarray, oracle: np.ndarray) -> dict[str, Callable]:
    """name -> (pretraining residual matrix -> predictor(level, anchors, residuals, counts))."""
    from wmrl_env.world_models.programs.program_covariance import fit_program_covariance

    def gp(shrinkage=0.5, noise_share=0.01, eb=False, rank=None, bias=0.0, use_oracle=False):
        def make(residuals):
            source = oracle if use_oracle else residuals
            fitted = fit_program_covariance(
                source, attributes=attributes, shrinkage=shrinkage, noise_share=noise_share
            )
            cov = fitted.covariance
            if rank:
                values, vectors = np.linalg.eigh(cov)
                low = (vectors[:, -rank:] * values[-rank:]) @ vectors[:, -rank:].T
                floor = 1e-4 * np.mean(np.diag(cov))
                cov = low + np.diag(np.maximum(np.diag(cov) - np.diag(low), floor))
            cov = cov + bias * np.mean(np.diag(cov))

            def predict(level, idx, residual, counts):
                if len(idx) == 0:
                    return level + fitted.mean
                scale, noise = 1.0, fitted.noise
                if eb:  # per-task prior scale and noise by the anchors' marginal likelihood
                    best = -np.inf
                    for s in (0.25, 0.5, 1.0, 2.0, 4.0):
                        for n in (1.0, 10.0, 100.0):
                            gram = s * cov[np.ix_(idx, idx)] + np.diag(n * fitted.noise / counts)
                            factor = cho_factor(gram, lower=True)
                            d = residual - fitted.mean[idx]
                            ll = -0.5 * d @ cho_solve(factor, d) - np.log(np.diag(factor[0])).sum()
                            if ll > best:
                                best, scale, noise = ll, s, n * fitted.noise
                return level + gp_mean(scale * cov, fitted.mean, noise, idx, residual, counts)

            return predict

        return make

    def knn(bandwidth=0.5):
        def make(residuals):
            profiles = residuals[~np.isnan(residuals).any(axis=1)]
            prior = np.nanmean(residuals, axis=0)

            def predict(level, idx, residual, counts):
                if len(idx) == 0:
                    return level + prior
                d = ((profiles[:, idx] - residual) ** 2 * counts).sum(1) / counts.sum()
                w = np.exp(-(d - d.min()) / (2 * bandwidth**2 * np.median(d) + 1e-12))
                return level + (w / w.sum()) @ profiles

            return predict

        return make

    def mix(a, b):
        def make(residuals):
            fa, fb = a(residuals), b(residuals)
            return lambda *x: 0.5 * fa(*x) + 0.5 * fb(*x)

        return make

    table = {
        "gp": gp(),
        "gp_eb": gp(eb=True),
        "knn": knn(),
        "mix": mix(gp(), knn()),
        "rank10": gp(rank=10),
        "bias": gp(bias=1.0),
        "oracle": gp(use_oracle=True),
    }
    for s in (0.3, 0.5, 0.7):
        for n in (0.01, 0.03, 0.1, 0.3):
            table[f"gp_s{s}_n{n}"] = gp(shrinkage=s, noise_share=n)
    return table


def evaluate(predict, real, level, repeats: int, seed: int = 0) -> dict:
    from wmrl_env.world_models.programs.program_profile import on_policy_draw

    out = {}
    for policy in ("uniform", "on_policy"):
        for n_groups in GROUPS:
            if policy == "on_policy" and n_groups == 0:
                continue
            rng = np.random.default_rng(seed + n_groups)
            spearman, regret = [], []
            for t in range(len(real)):
                for _ in range(repeats if n_groups else 1):
                    if policy == "uniform":
                        drawn = rng.permutation(72)[: 8 * n_groups]
                    else:
                        drawn = on_policy_draw(real[t], 8 * n_groups, rng)
                    idx, counts = np.unique(drawn, return_counts=True)
                    rest = np.setdiff1d(np.arange(72), idx)
                    residual = real[t, idx] - level[t, idx]
                    p = predict(level[t], idx, residual, counts.astype(float))
                    spearman.append(spearmanr(p[rest], real[t, rest]).statistic)
                    regret.append(real[t, rest].max() - real[t, rest][np.argmax(p[rest])])
            out[f"{policy[0]}{n_groups}"] = (np.nanmean(spearman), np.mean(regret))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--methods", default="gp,gp_eb,knn,mix,rank10,bias,oracle")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    data = score_matrices()
    (pre_real, pre_level), (held_real, held_level) = data["pre"], data["held"]
    pre_residual = pre_real - pre_level
    table = methods(data["attributes"], held_real - held_level)
    full = np.flatnonzero(~np.isnan(pre_real).any(axis=1))  # the train tasks: whole grid
    folds = np.arange(len(full)) % 4
    np.random.default_rng(1).shuffle(folds)
    for name in args.methods.split(","):
        rows = {}
        if name != "oracle":  # the oracle is a held-out reference line, never selected
            cells = []
            for f in range(4):
                scored = full[folds == f]
                fitted = table[name](np.delete(pre_residual, scored, axis=0))
                cells.append(evaluate(fitted, pre_real[scored], pre_level[scored], args.repeats))
            rows["CV"] = {k: tuple(np.mean([c[k] for c in cells], axis=0)) for k in cells[0]}
        predictor = table[name](pre_residual)
        rows["HO"] = evaluate(predictor, held_real, held_level, args.repeats)
        for split, row in rows.items():
            shown = " ".join(f"{k}:{s:.3f}/{r:.3f}" for k, (s, r) in row.items())
            print(f"{split} {name:16s} {shown}", flush=True)


if __name__ == "__main__":
    main()
