"""The README's quick start runs exactly as written, pasted alone into a fresh interpreter."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    assert len(blocks) == 1, "the README should hold exactly one Python example"
    return blocks[0]


def run_readme_example() -> dict:
    """Run the README block verbatim as a user would (no names supplied) and return what the
    test checks (as lists)."""
    namespace: dict = {"__name__": "__main__"}
    exec(compile(readme_example(), str(README), "exec"), namespace)
    info = namespace["info"]
    return {
        "is_anchor": info["is_anchor"].tolist(),
        "exec_status": info["exec_status"].tolist(),
        "exec_message": info["exec_message"].tolist(),
        "real_score": info["real_score"].tolist(),
        "advantage": info["advantage"].tolist(),
        "rewards": np.asarray(namespace["rewards"]).tolist(),
    }


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
    spearman = [line for line in printed if line.startswith("within-task Spearman: ")]
    assert len(spearman) == 1, done.stdout[-2000:]
    assert -1.0 <= float(spearman[0].split(": ")[1]) <= 1.0, spearman
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


def test_readme_block_defines_every_name_it_uses() -> None:
    """The block is pasted alone: every name it reads is imported or assigned in it."""
    import ast
    import builtins

    tree = ast.parse(readme_example())
    bound = set(dir(builtins))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.FunctionDef):
            bound.add(node.name)
            bound |= {a.arg for a in node.args.args}
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    assert used <= bound, f"the README block uses names it never defines: {sorted(used - bound)}"
