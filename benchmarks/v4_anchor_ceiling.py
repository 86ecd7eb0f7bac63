"""How much better v4 could learn a held-out task from its anchors if its posterior's
variances were fitted on the held-out tasks themselves: a ceiling, never a model.

The committed v4's pretrained prior is kept; its posterior's block variances and noise are
refitted by maximum marginal likelihood on the residuals of the pool suite's 14 held-out
tasks (in-sample: the tasks then measured), and the held-out figures of
``open_space_build --measure`` are read with both posteriors (random anchor groups of 8, 20
draws, Spearman on the programs not anchored). What the pretraining tasks cannot teach the
posterior is the gap between the two.

    python benchmarks/v4_anchor_ceiling.py --out runs/v4_anchor_ceiling.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from wmrl_env.bench.pool_suite import default_pool_tables
from wmrl_env.envs.ml_tasks.pool import read_pool
from wmrl_env.world_models import load_ml_world_model
from wmrl_env.world_models.programs.open_space_build import measure_heldout
from wmrl_env.world_models.programs.open_space_data import pool_training_rows
from wmrl_env.world_models.programs.residual_regression import fit_blocks


def heldout_residuals(model) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per held-out task, the posterior's design rows and the prior's residuals."""
    out = []
    for path in default_pool_tables():
        for task in sorted({r["task_id"] for r in read_pool(path)}):
            rows = pool_training_rows(path, tasks=[task], exclude=())  # measured, never fitted
            features, parsed, _ = model.rows(list(rows.descriptions), list(rows.programs))
            expected, _, _ = model.prior(features[parsed])
            out.append((model.z_rows(features[parsed], expected),
                        rows.reward[parsed] - expected))  # fmt: skip
    return out


def summary(figures: dict) -> dict:
    return {kind: {name: round(value, 3) for name, value in figures["mean"][kind]["all"].items()
                   if name.startswith(("spearman", "coverage"))}
            for kind in figures["mean"]}  # fmt: skip


def _numbers(prior) -> list[float]:
    return [*np.asarray(prior.variances).tolist(), prior.noise]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    model, ceiling = load_ml_world_model("v4"), load_ml_world_model("v4")
    prior = model.residual_prior
    ceiling.residual_prior = fit_blocks(heldout_residuals(model), prior.blocks,
                                        repeat_noise=prior.repeat_noise)  # fmt: skip
    report = {
        "committed": summary(measure_heldout(model)),
        "in-sample variances": summary(measure_heldout(ceiling)),
        "block variances, noise": {"committed": _numbers(prior),
                                   "in-sample": _numbers(ceiling.residual_prior)},
    }  # fmt: skip
    print(json.dumps(report, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
