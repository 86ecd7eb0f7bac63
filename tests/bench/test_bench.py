"""``wmrl bench``: the report's arithmetic, and a tiny end-to-end run on the replay table."""

from __future__ import annotations

import json

import numpy as np
import pytest

from wmrl_env.bench.config import ARMS, BenchConfig
from wmrl_env.bench.records import RunRecord, StepRecord
from wmrl_env.bench.report import markdown_table, seconds_to_reach, summarise
from wmrl_env.cli.bench import config_from_args
from wmrl_env.cli.main import build_parser


def make_run(arm: str, seed: int, seconds: list[float], scores: list[float]) -> RunRecord:
    steps = [
        StepRecord(step=i, real_exec_seconds=t, true_score=s)
        for i, (t, s) in enumerate(zip(seconds, scores, strict=True))
    ]
    return RunRecord(arm, seed, steps)


def test_speedup_is_the_ratio_of_seconds_to_reach_and_stay() -> None:
    runs = [
        make_run("real", 0, [10, 20, 30, 40], [0.5, 0.7, 0.9, 0.9]),
        make_run("real", 1, [10, 20, 30, 40], [0.5, 0.9, 0.9, 0.9]),
        make_run("wmrl", 0, [1, 2, 3, 4], [0.9, 0.6, 0.9, 0.9]),  # an early peak does not count
        make_run("wmrl", 1, [1, 2, 3, 4], [0.9, 0.6, 0.9, 0.9]),
        make_run("wm", 0, [0, 0, 0, 0], [0.5, 0.6, 0.6, 0.6]),
    ]
    summary = summarise(runs, tolerance=0.0)
    assert summary["real"].seconds_to_target == 30 and summary["real"].speedup == 1.0
    assert summary["wmrl"].seconds_to_target == 3 and summary["wmrl"].speedup == 10.0
    assert summary["wm"].speedup is None and summary["wm"].seconds_to_target is None
    assert summary["real"].final_score_ci is not None
    assert "not reached" in markdown_table(summary)


def test_reaching_needs_staying() -> None:
    assert seconds_to_reach(np.array([1.0, 2.0]), np.array([0.9, 0.1]), 0.5) is None


def test_config_checks_and_cli_overrides() -> None:
    with pytest.raises(ValueError, match="unknown arms"):
        BenchConfig(arms=("magic",))
    with pytest.raises(ValueError, match="true_score"):
        BenchConfig(true_score="guess")
    args = build_parser().parse_args(["bench", "--full", "--executor", "replay", "--seeds", "2"])
    config = config_from_args(args)
    assert config.seeds == 2 and config.executor == "replay" and config.num_groups == 20
    args = build_parser().parse_args(["bench", "--true-score", "live"])
    assert config_from_args(args).true_score == "live" and BenchConfig().true_score == "table"


@pytest.mark.slow
def test_the_table_scores_a_program_exactly_as_a_live_run_does() -> None:
    """The default true score (a table look-up) equals executing the program in the sandbox."""
    from wmrl_env.envs.ml_tasks import MLTaskEnv, ProgramSpec, load_table

    table = load_table()
    env = MLTaskEnv(tasks=["wine", "diabetes"], executor="local", action_mode="structured")
    try:
        for task, program in [("wine", "standardize-svm-mid"), ("diabetes", "none-forest-high")]:
            env.reset(options={"task_id": task})
            _, reward, _, _, info = env.step(ProgramSpec.from_id(program))
            assert info["status"] == "ok", info
            assert reward == table.lookup(task, program).score, (task, program)
    finally:
        env.close()


@pytest.mark.slow
@pytest.mark.transformers
def test_tiny_bench_on_the_replay_table_writes_consistent_outputs(tmp_path) -> None:
    from wmrl_env.bench import run_bench

    config = BenchConfig.quick(
        executor="replay",
        seeds=1,
        iterations=2,
        num_groups=2,
        group_size=2,
        tasks=("wine",),
        eval_every=1,
        out=str(tmp_path),
    )
    result = run_bench(config)
    results = json.loads((tmp_path / "results.json").read_text())
    assert set(results["arms"]) == set(ARMS)
    lines = (tmp_path / "runs.jsonl").read_text().splitlines()
    runs = [RunRecord.from_dict(json.loads(line)) for line in lines]
    assert {(r.arm, r.seed) for r in runs} == {(arm, 0) for arm in ARMS}
    real = results["arms"]["real"]
    for arm, row in results["arms"].items():
        for key in (
            "final_score_mean",
            "final_score_ci",
            "real_exec_seconds",
            "wall_seconds",
            "speedup",
        ):
            assert key in row, (arm, key)
        run = next(r for r in runs if r.arm == arm)
        assert row["real_exec_seconds"] == pytest.approx(run.steps[-1].real_exec_seconds)
        assert row["final_score_mean"] == pytest.approx(run.final_true_score)
        if row["speedup"] is not None:
            assert row["speedup"] == pytest.approx(
                real["seconds_to_target"] / row["seconds_to_target"]
            )
    # every executed real program was charged its recorded table seconds
    assert real["real_exec_seconds"] > 0 and results["arms"]["wm"]["real_exec_seconds"] == 0
    assert real["real_executions"] == 2 * 2 * 2  # every group of every round
    for name in ("score_vs_real_seconds.png", "anchor_gap.png", "calibration.png"):
        assert (tmp_path / name).stat().st_size > 1000
    assert result.folder == tmp_path
    assert BenchConfig(**json.loads((tmp_path / "config.json").read_text())) is not None
