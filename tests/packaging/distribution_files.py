"""Which files a wheel or sdist of wmrl-env must hold, and which of them one lacks.

Every file of the commit under ``wmrl_env/`` and ``envs/`` (installed as ``wmrl_env/envs/``) is
part of the package: its modules and every data file it reads at run time (the task suite's
manifest, references and execution table, the pretrained world models, the sandbox image's
recipe). Standard library only, so that ``scripts/check-wheel.sh`` runs it with any Python.

    python tests/packaging/distribution_files.py dist/*.whl dist/*.tar.gz
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def package_files(root: Path = ROOT) -> set[str]:
    """The package's files in the checkout's HEAD, as paths inside a wheel."""
    listed = subprocess.run(
        ["git", "-C", str(root), "ls-tree", "-r", "-z", "--name-only", "HEAD", "wmrl_env", "envs"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")
    return {f"wmrl_env/{name}" if name.startswith("envs/") else name for name in listed if name}


def archive_names(path: Path) -> set[str]:
    """The package paths inside a wheel, or inside an sdist (its top folder and the
    ``envs/`` -> ``wmrl_env/envs/`` mapping undone)."""
    if path.suffix == ".whl":
        with zipfile.ZipFile(path) as wheel:
            return set(wheel.namelist())
    with tarfile.open(path) as sdist:
        names = [member.name.split("/", 1)[-1] for member in sdist.getmembers() if member.isfile()]
    return {f"wmrl_env/{name}" if name.startswith("envs/") else name for name in names}


def missing(path: Path, root: Path = ROOT) -> list[str]:
    """The package files that the wheel or sdist at ``path`` lacks."""
    return sorted(package_files(root) - archive_names(path))


def main(paths: list[str]) -> int:
    status = 0
    for path in map(Path, paths):
        lacking = missing(path)
        size = path.stat().st_size / 1e6
        print(f"{path.name}: {size:.2f} MB, {len(lacking)} package files missing")
        for name in lacking:
            print(f"  missing: {name}")
        status |= bool(lacking)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
