"""Can a held-out task's anchors pick which pretraining task it resembles? A negative check.

v4's prior reads a program's features and the task's meta-features. Here the prior is also
evaluated as if the task had each pretraining task's meta-features (a "persona": 205 of them),
and a task's anchors weigh the personas by how well each one's expected rewards fit the real
ones (Gaussian likelihood with noise ``--noise``; the task's own meta-features keep the prior
weight ``--own``). Two rankings of the programs not anchored are compared with v4's own
(the committed posterior): the personas' weighted mean (``personas``) and v4's prediction
shifted by the personas' correction (``v4 + personas``). Held-out tasks of the pool suite,
the draws of ``open_space_build --measure`` (random anchor groups of 8, 20 draws, seed 0).

    python benchmarks/v4_task_personas.py --noise 0.15 --own 0.5 --out runs/personas.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from scipy.stats import rankdata, spearmanr

from wmrl_env.bench.pool_suite import default_pool_tables
from wmrl_env.envs.ml_tasks.pool import read_pool
from wmrl_env.world_models import load_ml_world_model
from wmrl_env.world_models.programs.open_space import PROGRAM_COLUMNS, model_columns
from wmrl_env.world_models.programs.open_space_build import pretraining_rows
from wmrl_env.world_models.programs.open_space_data import pool_training_rows
from wmrl_env.world_models.programs.open_space_fit import _anchor_draws
from wmrl_env.world_models.programs.open_space_tasks import task_vector

GROUPS = (0, 1, 2, 4)
RANKINGS = ("v4", "personas", "v4 + personas")


def persona_rewards(model, rows: np.ndarray, personas: list[np.ndarray]) -> np.ndarray:
    """(programs, personas) expected rewards of parsed ``rows`` under each meta-feature set."""
    width = len(PROGRAM_COLUMNS)
    out = []
    for task in personas:
        changed = rows.copy()
        changed[:, width:-1] = task
        changed[:, -1] = [model_columns(row[:width], task) for row in changed]
        out.append(model.prior(changed)[0])
    return np.array(out).T


def persona_weights(expected: np.ndarray, anchors: np.ndarray, real: np.ndarray,
                    noise: float, own: float) -> np.ndarray:  # fmt: skip
    """Posterior weights of the personas (column 0: the task's own meta-features)."""
    log_w = np.full(expected.shape[1], np.log((1 - own) / (expected.shape[1] - 1)))
    log_w[0] = np.log(own)
    if len(anchors):
        log_w -= ((real[anchors, None] - expected[anchors]) ** 2).sum(0) / (2 * noise**2)
    weights = np.exp(log_w - log_w.max())
    return weights / weights.sum()


def task_figures(model, rows, personas, noise: float, own: float) -> dict[int, list[float]]:
    contexts, programs, real = list(rows.descriptions), list(rows.programs), rows.reward
    features, parsed, _ = model.rows(contexts, programs)
    own_task = features[parsed][0, len(PROGRAM_COLUMNS) : -1]
    expected = np.zeros((len(programs), len(personas) + 1))
    expected[parsed] = persona_rewards(model, features[parsed], [own_task, *personas])
    rng, figures = np.random.default_rng(0), {}
    for groups in GROUPS:
        rhos: list[list[float]] = []
        for anchors in _anchor_draws(len(programs), groups, 20, rng):
            model.reset_task(contexts[0])
            if len(anchors):
                model.update([contexts[i] for i in anchors], [programs[i] for i in anchors],
                             real[anchors])  # fmt: skip
            rest = np.setdiff1d(np.arange(len(programs)), anchors)
            v4 = model.predict([contexts[i] for i in rest], [programs[i] for i in rest]).scores
            mixed = expected[rest] @ persona_weights(expected, anchors, real, noise, own)
            if np.ptp(real[rest]) > 0:
                rhos.append([spearmanr(rankdata(s), real[rest]).statistic
                             for s in (v4, mixed, v4 + mixed - expected[rest, 0])])  # fmt: skip
        figures[groups] = np.mean(rhos, axis=0).tolist()
    model.reset_task(contexts[0])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--noise", type=float, default=0.15)
    parser.add_argument("--own", type=float, default=0.5)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    model = load_ml_world_model("v4")
    personas = [task_vector(text) for text in sorted(set(pretraining_rows().descriptions))]
    per_task = {}
    for path in default_pool_tables():
        for task in sorted({r["task_id"] for r in read_pool(path)}):
            rows = pool_training_rows(path, tasks=[task], exclude=())  # measured, never fitted
            per_task[task] = task_figures(model, rows, personas, args.noise, args.own)
    mean = {}
    for groups in GROUPS:
        figures = np.mean([per_task[t][groups] for t in per_task], axis=0)
        mean[f"spearman@{groups}"] = dict(zip(RANKINGS, np.round(figures, 3).tolist(), strict=True))
    report = {"personas": len(personas), "noise": args.noise, "own": args.own, "mean": mean,
              "tasks": per_task}  # fmt: skip
    print(json.dumps({k: v for k, v in report.items() if k != "tasks"}, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
