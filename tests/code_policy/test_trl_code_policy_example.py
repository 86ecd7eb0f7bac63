"""examples/trl_code_policy.py end to end with tiny sizes: a behaviour-cloned GPT-2 (cached),
two TRL GRPO steps on world-model rewards with real anchors, the result record."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.trl, pytest.mark.transformers, pytest.mark.slow]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "trl_code_policy.py"
TINY = [
    "--steps", "2", "--num-generations", "2", "--tasks", "diabetes,daag_antigua",
    "--eval-samples", "1", "--bc-per-task", "2", "--bc-epochs", "1", "--bc-splits", "heldout",
    "--max-completion-length", "48",
]  # fmt: skip


def load_example():
    spec = importlib.util.spec_from_file_location("trl_code_policy", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def _restore_threads():
    import torch

    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)  # the example pins one thread for its tiny network


def test_two_grpo_steps_record_scores_executions_and_a_checkpoint(tmp_path) -> None:
    example = load_example()
    argv = [*TINY, "--cache-dir", str(tmp_path / "cache"), "--out-dir", str(tmp_path / "out")]
    result = example.main(["--arm", "wmrl", *argv])
    run = tmp_path / "out" / "wmrl-seed0"
    assert json.loads((run / "result.json").read_text()) == json.loads(json.dumps(result))
    assert set(result["before"]["greedy"]) == {"diabetes", "daag_antigua"}
    for record in (result["before"], result["after"]):
        assert all(0.0 <= s <= 1.0 for s in record["greedy"].values())
        assert record["sampled"]["samples"] == 2.0
    # one anchored group (of 2 programs) per step at least, each logged once: executed, or
    # scored as a known failure without running (the tiny clone writes mostly unparseable text)
    calls = [json.loads(line) for line in (run / "calls.jsonl").read_text().splitlines()]
    assert len(calls) == 2 and result["real_executions"] == sum(len(c["executed"]) for c in calls)
    assert result["known_failures"] == sum(c["known_failures"] for c in calls)
    assert result["real_executions"] + result["known_failures"] >= 4
    assert (run / "grpo" / "checkpoint-2" / "wmrl_state.pkl").is_file()
    assert (run / "final" / "config.json").is_file()  # the after-scores are of the saved model
    assert len(list((tmp_path / "cache").iterdir())) == 1  # the clone, cached for the next run


def test_an_unknown_arm_is_refused() -> None:
    with pytest.raises(ValueError, match="--arm must be one of"):
        load_example().main(["--arm", "wm"])
