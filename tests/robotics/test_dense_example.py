"""The dense-progress GRPO example runs end to end on real MuJoCo (tiny sizes)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "vla_dense_grpo.py"


@pytest.mark.robosuite
@pytest.mark.torch
def test_the_dense_progress_example_trains_and_reports_each_round(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("vla_dense_grpo", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    args = ["--rounds", "2", "--groups", "2", "--group-size", "2", "--eval-starts", "2",
            "--cache-dir", str(tmp_path)]  # fmt: skip
    result = example.main(args)
    rounds = [json.loads(line) for line in capsys.readouterr().out.splitlines()
              if line.startswith('{"round"')]  # fmt: skip
    assert [r["round"] for r in rounds] == [1, 2]
    for row in rounds:  # the progress model's on-policy check of the round's 4 real episodes
        assert 0.0 <= row["real_success"] <= 1.0
        assert row["calibration"]["calibration"] == "affine"
    assert result["finite"] and result["held_out_starts"] == 2
    assert 0.0 <= result["held_out_success_after"] <= 1.0
