"""Build (and measure) world model v4 from the committed pretraining table.

    python -m wmrl_env.world_models.programs.open_space_build --out ml_open_v4.npz
    python -m wmrl_env.world_models.programs.open_space_build --measure report.json

``--out`` fits the chosen design (:data:`DEFAULT_DESIGN`, picked by
:mod:`~.open_space_selection` on pretraining tasks only) on every task of the pretraining
table and saves it. ``--measure`` reads the committed model on the second suite's held-out
tasks (the generated ``_s0`` tasks and the real-data ``rd_`` tasks of the bench's pool
tables, never used to fit or choose anything): per task the figures of
:func:`~.open_space_fit.evaluate_task` on all the pool's programs and on the sampled ones only
(programs outside the first suite's 72), their means over the generated, the real-data and
all tasks, and new programs per CPU-second.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "DEFAULT_DESIGN",
    "build",
    "measure_heldout",
    "pretraining_rows",
    "programs_per_cpu_second",
]

DEFAULT_DESIGN = "boost_factored"


def pretraining_rows(table: str | Path | None = None, first_suite: bool = True) -> Any:
    """v4's pretraining rows: every task of the pretraining pool table and, with
    ``first_suite``, the first suite's real datasets of its pretraining (``wm``) and
    ``train`` splits (their 72 grid programs)."""
    from wmrl_env.world_models.programs.open_space_data import (
        concat_rows,
        default_pretraining_table,
        pool_training_rows,
        table_training_rows,
    )

    rows = pool_training_rows(table or default_pretraining_table())
    return concat_rows(rows, table_training_rows()) if first_suite else rows


def build(
    out: str | Path,
    design: str = DEFAULT_DESIGN,
    table: str | None = None,
    first_suite: bool = True,
) -> Path:
    """Fit v4 on :func:`pretraining_rows` and save it to ``out``."""
    from wmrl_env.world_models.programs.open_space_fit import fit_open_space

    return fit_open_space(pretraining_rows(table, first_suite), design).save(out)


def programs_per_cpu_second(model: Any, n: int = 4000, seed: int = 123) -> float:
    """New (never seen) grammar programs scored per CPU-second, parse to contract, on one
    generated task (its meta-features computed before the clock starts)."""
    from wmrl_env.envs.ml_tasks.grammar import sample_programs
    from wmrl_env.envs.ml_tasks.headroom import headroom_task

    task = headroom_task("hr_interactions_s7")
    model.predict([task.description], [sample_programs(1, seed + 1)[0].render(task.kind)])
    texts = [p.render(task.kind) for p in sample_programs(n, seed)]
    start = time.process_time()
    model.predict_outcomes([task.description] * n, texts)
    return n / (time.process_time() - start)


def measure_heldout(
    model: Any, tables: Sequence[str | Path] | None = None, draws: int = 20
) -> dict[str, Any]:
    """The held-out figures of the module doc: per task, and means over the generated
    tasks, the real-data tasks and all of them (``mean`` -> ``generated`` / ``real`` /
    ``all`` -> ``all`` or ``sampled`` programs -> figure)."""
    from wmrl_env.bench.pool_suite import default_pool_tables
    from wmrl_env.envs.ml_tasks.grammar import v1_subset
    from wmrl_env.envs.ml_tasks.pool import read_pool
    from wmrl_env.world_models.programs.open_space_data import pool_training_rows
    from wmrl_env.world_models.programs.open_space_fit import _subset, evaluate_task

    named = {p.render(kind) for p in v1_subset() for kind in ("binary", "multiclass", "regression")}
    per_task: dict[str, dict[str, Any]] = {}
    for path in tables or default_pool_tables():
        for task in sorted({r["task_id"] for r in read_pool(path)}):
            rows = pool_training_rows(path, tasks=[task], exclude=())  # measured, never fitted
            sampled = _subset(rows, np.array([p not in named for p in rows.programs]))
            per_task[task] = {
                "all": evaluate_task(model, rows, draws=draws),
                "sampled": evaluate_task(model, sampled, draws=draws),
            }
    kinds = {
        "generated": [t for t in per_task if t.startswith("hr_")],
        "real": [t for t in per_task if not t.startswith("hr_")],
        "all": list(per_task),
    }
    means = {
        kind: {
            part: {
                name: float(np.nanmean([per_task[t][part][name] for t in tasks]))
                for name in per_task[tasks[0]][part]
            }
            for part in ("all", "sampled")
        }
        for kind, tasks in kinds.items()
        if tasks
    }
    return {"mean": means, "tasks": per_task, "programs_per_cpu_second":
            programs_per_cpu_second(model)}  # fmt: skip


def main(argv: Sequence[str] | None = None) -> None:
    from wmrl_env.world_models.programs.ml_default import load_ml_world_model

    parser = argparse.ArgumentParser(
        prog="python -m wmrl_env.world_models.programs.open_space_build",
        description="Fit world model v4 on the pretraining table, or measure the committed "
        "one on the second suite's held-out tasks.",
    )
    parser.add_argument("--out", default=None, help="write the fitted model here (.npz)")
    parser.add_argument("--design", default=DEFAULT_DESIGN)
    parser.add_argument(
        "--generated-only",
        action="store_true",
        help="pretrain on the generated pretraining tasks only (not the first suite's real "
        "datasets)",
    )
    parser.add_argument("--measure", default=None, help="write the held-out figures (JSON)")
    args = parser.parse_args(argv)
    if not (args.out or args.measure):
        parser.error("give --out, --measure or both")
    if args.out:
        print(f"saved {build(args.out, args.design, first_suite=not args.generated_only)}")
    if args.measure:
        model = load_ml_world_model("v4", args.out)
        figures = measure_heldout(model)
        Path(args.measure).write_text(json.dumps(figures, indent=1) + "\n")
        print(json.dumps(figures["mean"], indent=1))
        print(f"new programs per CPU-second: {figures['programs_per_cpu_second']:.0f}")


if __name__ == "__main__":
    main()
