"""scripts/gpu-check.sh's module on a CPU with the tiny config: every part measured or
skipped with its reason (vLLM: never faked without its GPU engine), the JSON written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.trl, pytest.mark.transformers, pytest.mark.slow]

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gpu-check.sh"


def test_tiny_cpu_check_measures_each_part_or_names_why_not(tmp_path) -> None:
    from wmrl_env.bench.gpu_check import run_gpu_check

    out = tmp_path / "figures.json"
    figures = run_gpu_check(
        ["tiny"],
        out,
        device="cpu",
        num_programs=8,
        batch_size=4,
        grpo_sizes=["tiny"],
        num_generations=2,
    )
    assert json.loads(out.read_text()) == json.loads(json.dumps(figures))
    tiny = figures["sizes"]["tiny"]
    assert tiny["parameters"] > 0 and tiny["build_seconds"] > 0
    assert "skipped" in tiny["vllm"] and (
        "not installed" in tiny["vllm"]["skipped"] or "no CUDA GPU" in tiny["vllm"]["skipped"]
    )
    assert "programs_per_s" not in tiny["vllm"]
    causal = tiny["causal_lm"]
    assert causal["batch_size"] == 4 and causal["seconds_per_batch"] > 0, causal
    assert causal["programs_per_s"] == pytest.approx(4 / causal["seconds_per_batch"], rel=1e-6)
    online = tiny["online"]
    assert online["steps"] == 4 and online["update_seconds"] > 0, online
    assert online["trainable_parameters"] > 0 and online["anchors"] == 8
    assert "skipped" in tiny["vllm_online"]
    grpo = tiny["grpo"]
    assert grpo["completions_per_step"] == 4 and grpo["step_seconds"] > 0, grpo
    assert grpo["real_executions"] >= 2  # each step anchors at least one group of 2


def test_unknown_size_is_refused(tmp_path) -> None:
    from wmrl_env.bench.gpu_check import build_random_model

    with pytest.raises(ValueError, match="size must be one of"):
        build_random_model("70b", tmp_path)


def test_the_script_forwards_its_arguments() -> None:
    env = {**os.environ, "PYTHON": sys.executable}
    done = subprocess.run(
        ["bash", str(SCRIPT), "--help"], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0 and "--grpo-sizes" in done.stdout, done.stderr
