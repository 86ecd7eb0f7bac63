"""What a core-only install sees: ``pytest`` collects without errors, and every module that
needs an extra is a skip naming that extra (README: a missing dependency means a skip)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_collection_with_every_extra_blocked() -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]
        ),
        "WMRL_REQUIRED_MARKERS": "",
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "block_extras",
            "-p",
            "no:cacheprovider",
            "-rs",
            "wmrl_env",
            "tests",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert " error" not in output.splitlines()[-1], output[-4000:]
    assert "needs torch, which is not installed (pip install 'wmrl-env[torch]')" in output
    assert "tests collected" in output or "test collected" in output
