"""The wheel built from the commit holds every file of the package, its data included
(``scripts/check-wheel.sh`` also checks the sdist and installs the wheel outside the clone)."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from distribution_files import ROOT, archive_names, missing, package_files

DATA = {
    "wmrl_env/envs/ml_tasks/data/manifest.json",
    "wmrl_env/envs/ml_tasks/data/references.json",
    "wmrl_env/envs/ml_tasks/data/table_v1.csv.gz",
    "wmrl_env/envs/sandbox_image/Dockerfile",
    "wmrl_env/world_models/programs/pretrained/ml_program_profile_v3.npz",
    "wmrl_env/world_models/programs/pretrained/ml_program_task_v2.npz",
    "wmrl_env/world_models/programs/pretrained/ml_status_v2.npz",
    "wmrl_env/world_models/programs/pretrained/ml_status_v3.npz",
    "wmrl_env/world_models/programs/pretrained/ml_open_v4.npz",
    "wmrl_env/envs/ml_tasks/data/pool_pretrain_v1.jsonl",
}


def test_the_package_files_are_its_modules_and_its_data():
    files = package_files()
    assert files >= DATA
    assert "wmrl_env/__init__.py" in files and "wmrl_env/envs/ml_tasks/tables.py" in files


def test_an_archive_lacking_a_data_file_is_caught(tmp_path):
    wheel, sdist = tmp_path / "w.whl", tmp_path / "s.tar.gz"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name in package_files() - {"wmrl_env/envs/ml_tasks/data/table_v1.csv.gz"}:
            archive.writestr(name, "")
    assert missing(wheel) == ["wmrl_env/envs/ml_tasks/data/table_v1.csv.gz"]
    source = tmp_path / "empty.py"
    source.write_text("")
    with tarfile.open(sdist, "w:gz") as archive:
        archive.add(source, "wmrl_env-0.2.0/envs/ml_tasks/data/manifest.json")
    assert archive_names(sdist) == {"wmrl_env/envs/ml_tasks/data/manifest.json"}


@pytest.mark.slow
def test_the_wheel_built_from_the_commit_holds_every_package_file(tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", "HEAD"], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive, check=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "--wheel-dir", str(tmp_path / "dist"), str(source)],
        check=True, timeout=600,
    )  # fmt: skip
    (wheel,) = Path(tmp_path / "dist").glob("wmrl_env-*.whl")
    assert missing(wheel) == []
    assert archive_names(wheel) >= DATA
    licenses = [n for n in zipfile.ZipFile(wheel).namelist() if n.endswith("licenses/LICENSE")]
    assert licenses, "the wheel carries no LICENSE"
