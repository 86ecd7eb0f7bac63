"""The README's usage example runs as written, with a policy that samples the program space."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
QUICKSTART = README.parent / "scripts" / "readme_quickstart.py"


def readme_example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    assert len(blocks) == 1, "the README should hold exactly one Python example"
    return blocks[0]


def sampling_policy():
    """Task descriptions -> programs: a random choice of the structured space per task (the
    policy scripts/readme_quickstart.py gives the block when it runs it from an install)."""
    spec = importlib.util.spec_from_file_location("readme_quickstart", QUICKSTART)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.sampling_policy(seed=0)


def run_readme_example() -> dict:
    """Run the README block as a user would and return what the test checks (as lists)."""
    namespace = {"my_policy": sampling_policy()}
    exec(compile(readme_example(), str(README), "exec"), namespace)
    info, envs = namespace["info"], namespace["envs"]
    try:
        return {
            "is_anchor": info["is_anchor"].tolist(),
            "exec_status": info["exec_status"].tolist(),
            "exec_message": info["exec_message"].tolist(),
            "real_score": info["real_score"].tolist(),
            "advantage": info["advantage"].tolist(),
            "rewards": np.asarray(namespace["rewards"]).tolist(),
        }
    finally:
        envs.close()


@pytest.mark.slow
@pytest.mark.transformers
def test_readme_example_runs_and_executes_one_group_for_real() -> None:
    # a fresh interpreter, as a user runs it: no state left by the tests that ran before
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); import test_readme; "
        "print('RESULT ' + json.dumps(test_readme.run_readme_example()))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(Path(__file__).parent)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    printed = [line for line in done.stdout.splitlines() if not line.startswith("RESULT ")]
    assert printed and printed[0].startswith("8 "), done.stdout[-2000:]
    result = json.loads(done.stdout.split("RESULT ", 1)[1])
    anchors = np.array(result["is_anchor"])
    assert anchors.sum() == 8  # one group of 8 in 10 groups (10 %)
    statuses = [
        (status, message)
        for status, message, anchor in zip(
            result["exec_status"], result["exec_message"], anchors, strict=True
        )
        if anchor
    ]
    assert all(status == "ok" for status, _ in statuses), statuses
    real = np.array(result["real_score"], dtype=float)
    assert np.isfinite(real[anchors]).all()
    assert np.isnan(real[~anchors]).all()
    assert np.isfinite(result["advantage"]).all() and np.isfinite(result["rewards"]).all()
