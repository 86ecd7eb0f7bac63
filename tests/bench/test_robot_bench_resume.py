"""``wmrl bench --domain robosuite`` resumes a folder only when its runs were made with the same
configuration, package and simulator: real MuJoCo, one arm, one round of two groups of two."""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from wmrl_env.bench.robotics.config import RobotBenchConfig
from wmrl_env.bench.run_log import StaleRunLog
from wmrl_env.cli import bench as bench_cli

RECIPE = {"num_episodes": 2, "noise": 0.0, "perturb_prob": 0.0, "epochs": 5, "horizon": 64}


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A folder with seed 0 of the anchors arm, and the config that made it."""
    from wmrl_env.bench.robotics import run_robot_bench

    folder = tmp_path_factory.mktemp("robot-resume")
    config = RobotBenchConfig(
        arms=("anchors",), seeds=1, iterations=1, num_groups=2, group_size=2,
        anchor_fraction=0.5, eval_every=1, eval_starts=1, ensemble_size=2, hidden=16,
        world_model="random", recipe=RECIPE, cache_dir=str(folder / "cache"),
        out=str(folder / "out"),
    )  # fmt: skip
    run_robot_bench(config)
    return config, Path(config.out)


def _copy(made, tmp_path: Path) -> tuple[RobotBenchConfig, Path]:
    config, folder = made
    copy = tmp_path / "out"
    shutil.copytree(folder, copy)
    return dataclasses.replace(config, out=str(copy)), copy


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.robosuite
def test_a_stamped_folder_resumes_with_more_seeds(made, tmp_path):
    """Every run and seed line carries what it was made with; more seeds (and another first
    seed, cache folder or arm list) resume the folder and run only what is missing."""
    from wmrl_env.bench.robotics import run_fingerprint, run_robot_bench

    config, folder = _copy(made, tmp_path)
    before = (folder / "runs.jsonl").read_text()
    more = dataclasses.replace(config, seeds=2, cache_dir=str(tmp_path / "other-cache"))
    assert run_fingerprint(more) == run_fingerprint(config)
    result = run_robot_bench(more)
    after = (folder / "runs.jsonl").read_text()
    assert after.startswith(before)  # seed 0 read back, not run again
    assert sorted((r.arm, r.seed) for r in result.runs) == [("anchors", 0), ("anchors", 1)]
    for name in ("runs.jsonl", "seeds.jsonl"):
        rows = [json.loads(line) for line in (folder / name).read_text().splitlines()]
        assert len(rows) == 2
        assert all(row["made_with"] == run_fingerprint(config) for row in rows)
    results = json.loads((folder / "results.json").read_text())
    assert all("made_with" not in row for row in results["seeds"])


@pytest.mark.robosuite
@pytest.mark.parametrize(
    ("changed", "what"),
    [({"iterations": 2}, "config.iterations"), ({"eval_starts": 2}, "config.eval_starts")],
)
def test_a_folder_made_with_another_config_is_refused_untouched(made, tmp_path, changed, what):
    from wmrl_env.bench.robotics import run_robot_bench

    config, folder = _copy(made, tmp_path)
    files = _files(folder)
    with pytest.raises(StaleRunLog, match=what):
        run_robot_bench(dataclasses.replace(config, seeds=2, **changed))
    assert _files(folder) == files


@pytest.mark.robosuite
@pytest.mark.parametrize("name", ["runs.jsonl", "seeds.jsonl"])
def test_an_unstamped_folder_is_refused_untouched(made, tmp_path, name):
    """A folder from before runs were stamped (here: one file's stamps removed) is refused."""
    from wmrl_env.bench.robotics import run_robot_bench

    config, folder = _copy(made, tmp_path)
    rows = [json.loads(line) for line in (folder / name).read_text().splitlines()]
    (folder / name).write_text("".join(
        json.dumps({k: v for k, v in row.items() if k != "made_with"}) + "\n" for row in rows
    ))  # fmt: skip
    files = _files(folder)
    with pytest.raises(StaleRunLog, match="older log"):
        run_robot_bench(dataclasses.replace(config, seeds=2))
    assert _files(folder) == files


@pytest.mark.robosuite
def test_the_cli_refuses_a_stale_folder_with_exit_2(made, tmp_path, capsys, monkeypatch):
    from wmrl_env.bench.robotics import start

    def never(*args, **kwargs):
        raise AssertionError("the bench ran instead of refusing the folder")

    monkeypatch.setattr(start, "prepare_seed", never)
    _, folder = _copy(made, tmp_path)
    files = _files(folder)
    parser = argparse.ArgumentParser()
    bench_cli.register(parser.add_subparsers())
    args = parser.parse_args(["bench", "--domain", "robosuite", "--out", str(folder)])
    assert bench_cli.run(args) == 2  # the quick preset: another configuration
    error = capsys.readouterr().err
    assert "runs.jsonl, line 1: a run made with another config." in error
    assert "Give a new --out" in error
    assert _files(folder) == files
