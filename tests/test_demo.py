"""The synthetic bandit demo and its ``wmrl demo`` command."""

from __future__ import annotations

import numpy as np

from wmrl_env.cli.main import main
from wmrl_env.demo import run_demo


def test_wmrl_learns_where_the_world_model_alone_is_hacked() -> None:
    results = run_demo(steps=150, seeds=4, methods=("wm", "wmrl"))
    wm, wmrl = results["wm"], results["wmrl"]
    margin = 4.0 * np.hypot(wm.true_success_se, wmrl.true_success_se)
    assert wmrl.true_success - wm.true_success > margin
    assert wm.true_success < wm.start_success  # the exploit pulls the raw world model down
    assert wmrl.wm_mse_calibrated < wmrl.wm_mse_raw


def test_cli_prints_a_table(capsys) -> None:
    assert main(["demo", "--steps", "3", "--seeds", "1", "--methods", "real", "ppi"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("| method |") and "| ppi |" in out and "| real |" in out
