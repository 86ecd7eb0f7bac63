"""examples/multiturn_lm_reviser.py end to end with tiny sizes: a GPT-2 built from a config and
cloned on revision pairs (cached), two GRPO rounds with anchors, the held-out scores."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.transformers, pytest.mark.torch, pytest.mark.slow]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "multiturn_lm_reviser.py"
TINY = [
    "--rounds", "2", "--num-groups", "2", "--group-size", "2", "--anchor-fraction", "0.5",
    "--heldout-tasks", "2", "--bc-tasks-per-split", "2", "--bc-epochs", "1",
    "--hidden-size", "32", "--num-layers", "1",
]  # fmt: skip


def load_example():
    spec = importlib.util.spec_from_file_location("multiturn_lm_reviser", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_clone_then_two_grpo_rounds_with_anchors(tmp_path, capsys) -> None:
    run = load_example().main(["--method", "wmrl", *TINY, "--cache-dir", str(tmp_path)])
    assert run["arm"] == "wmrl" and len(run["losses"]) == 2
    (final,) = run["checkpoints"]
    # one anchor group of 2 episodes per round, each 1 to 3 real executions
    assert 2 * 2 <= final["real_executions"] <= 2 * 2 * 3
    assert final["live_executions"] == 0  # every program written is one the table holds
    assert 0.0 <= final["real_best"] <= 1.0 and 0.0 <= final["sim_best"] <= 1.0
    assert list(tmp_path.glob("lm-reviser-seed0-*/bc_log.json"))
    assert "held-out best score real" in capsys.readouterr().out
