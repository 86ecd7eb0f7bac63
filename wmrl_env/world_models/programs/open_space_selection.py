"""Choosing v4's design by cross-validation over pretraining tasks only.

For each design of :data:`~.open_space.DESIGNS`, two schemes over the pretraining table's
tasks: leave one task out (the other seed of its family stays in training:
same-family-other-seed) and leave one family out (zero-shot on a family never seen). Each
held-out task is read with :func:`~.open_space_fit.evaluate_task`; the figures are means
over tasks. No held-out task of the suite is read.

    python -m wmrl_env.world_models.programs.open_space_selection --out cv.json
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

import numpy as np

from wmrl_env.world_models.programs.open_space import DESIGNS
from wmrl_env.world_models.programs.open_space_data import (
    TrainingRows,
    default_pretraining_table,
    pool_training_rows,
)
from wmrl_env.world_models.programs.open_space_fit import evaluate_task, family_of, fit_open_space

__all__ = ["cross_validate", "selection_markdown"]

SCHEMES = ("task", "family")
RESIDUAL_FOLDS = ("seed", "family")


def _split(rows: TrainingRows, keep: set[str]) -> TrainingRows:
    from wmrl_env.world_models.programs.open_space_fit import _subset

    return _subset(rows, np.array([t in keep for t in rows.task_ids]))


def cross_validate(
    rows: TrainingRows,
    designs: Sequence[str] = DESIGNS,
    schemes: Sequence[str] = SCHEMES,
    draws: int = 20,
    residual_folds: Sequence[str] = RESIDUAL_FOLDS,
) -> dict[str, dict[str, dict[str, float]]]:
    """``design/residual folds`` -> scheme -> mean figures over held-out tasks (and per
    task under ``"tasks"``)."""
    tasks = sorted(set(rows.task_ids))
    out: dict[str, dict] = {}
    for design in designs:
        for folds in residual_folds:
            name = f"{design}/{folds}"
            out[name] = {}
            for scheme in schemes:
                key = (lambda t: t) if scheme == "task" else family_of
                per_task = {}
                for fold in sorted({key(t) for t in tasks}):
                    held = {t for t in tasks if key(t) == fold}
                    train = _split(rows, set(tasks) - held)
                    model = fit_open_space(train, design, residual_folds=folds)
                    for task in sorted(held):
                        per_task[task] = evaluate_task(model, _split(rows, {task}), draws=draws)
                names = next(iter(per_task.values())).keys()
                out[name][scheme] = {
                    **{n: float(np.nanmean([f[n] for f in per_task.values()])) for n in names},
                    "tasks": per_task,
                }
    return out


def selection_markdown(results: dict) -> str:
    columns = ("spearman@0", "spearman@1", "spearman@4", "coverage@0", "coverage@1",
               "coverage@4", "failure_auc", "status_accuracy")  # fmt: skip
    lines = ["| design / residual folds | held out | " + " | ".join(columns) + " |",
             "|---|---|" + "---|" * len(columns)]  # fmt: skip
    for design, schemes in results.items():
        for scheme, figures in schemes.items():
            cells = " | ".join(f"{figures[c]:.3f}" for c in columns)
            lines.append(f"| {design} | one {scheme} | {cells} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m wmrl_env.world_models.programs.open_space_selection",
        description="Cross-validate v4's designs over the pretraining table's tasks.",
    )
    parser.add_argument("--table", default=str(default_pretraining_table()))
    parser.add_argument("--designs", nargs="+", default=list(DESIGNS), choices=DESIGNS)
    parser.add_argument("--draws", type=int, default=20)
    parser.add_argument(
        "--residual-folds", nargs="+", default=list(RESIDUAL_FOLDS), choices=RESIDUAL_FOLDS
    )
    parser.add_argument("--out", default=None, help="a JSON file for the figures")
    args = parser.parse_args(argv)
    results = cross_validate(
        pool_training_rows(args.table),
        args.designs,
        draws=args.draws,
        residual_folds=args.residual_folds,
    )
    print(selection_markdown(results))
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(results, handle, indent=1)


if __name__ == "__main__":
    main()
