"""The example scripts run end to end with tiny sizes."""

from __future__ import annotations

import ast
import importlib
import runpy
from pathlib import Path

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def examples_on_path(monkeypatch):
    import torch

    monkeypatch.syspath_prepend(str(EXAMPLES))
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)  # the examples pin one thread for their tiny networks


def test_every_example_stands_alone() -> None:
    """An example is one file read top to bottom: it imports no other example."""
    examples = {path.stem for path in EXAMPLES.glob("*.py")}
    for path in sorted(EXAMPLES.glob("*.py")):
        imported = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported.add(node.module.split(".")[0])
        assert not imported & examples, f"{path.name} imports {sorted(imported & examples)}"


def test_quickstart(capsys) -> None:
    runpy.run_path(str(EXAMPLES / "wrapper_quickstart.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "executed for real: 8 of 32 answers" in out and "kappa" in out


@pytest.mark.torch
@pytest.mark.slow
def test_grpo_bandit(examples_on_path) -> None:
    example = importlib.import_module("grpo_bandit")
    history = example.main(["--iterations", "3", "--num-groups", "4", "--group-size", "4"])
    assert len(history) == 3 and np.isfinite(history[-1]["true_reward_mean"])


@pytest.mark.sb3
def test_sb3_ppo(examples_on_path) -> None:
    example = importlib.import_module("sb3_ppo")
    args = ["--timesteps", "64", "--num-groups", "2", "--group-size", "4", "--n-steps", "8"]
    assert 0.0 <= example.main(args) <= 1.0


def test_docs_example_runs(capsys) -> None:
    """The first code block of docs/wrappers.md is the page's runnable example."""
    page = (EXAMPLES.parent / "docs" / "wrappers.md").read_text()
    code = page.split("```python\n", 1)[1].split("```", 1)[0]
    exec(compile(code, "docs/wrappers.md", "exec"), {})
    assert capsys.readouterr().out.startswith("8 ")


def test_multiturn_revise(examples_on_path, capsys) -> None:
    """Two rounds of simulated multi-turn episodes with one anchor group, scored for real."""
    example = importlib.import_module("multiturn_revise")
    run = example.main(
        ["--rounds", "2", "--num-groups", "4", "--group-size", "2", "--max-turns", "2",
         "--anchor-fraction", "0.25", "--heldout-tasks", "2"]
    )  # fmt: skip
    assert run["arm"] == "wmrl" and run["checkpoints"][-1]["real_executions"] >= 2 * 2
    assert "held-out score: real / simulated" in capsys.readouterr().out
