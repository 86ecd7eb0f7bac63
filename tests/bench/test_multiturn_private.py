"""The scripted reviser's private-gain run and the simulator's fidelity on its real turns:
live episodes in the local sandbox (one cheap start), a resumed run that executes nothing,
and the fidelity read from the recorded turns alone."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from wmrl_env.bench.multiturn_private import (
    SUITES,
    bootstrap_interval,
    play_starts,
    private_gains,
    turn_fidelity,
)
from wmrl_env.world_models.outcomes import OutcomePrediction

pytestmark = pytest.mark.slow

# seed 11 draws none-linear-high: it crashes on the missing values, the fix runs
TASK, SEED = "hr_missing_s0", 11
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def records() -> list[dict]:
    return list(play_starts(TASK, [SEED], 2))


def test_live_episodes_record_every_real_turn(records) -> None:
    one, two = records
    assert (one["turns"], two["turns"]) == (1, 2)
    first = two["steps"][0]
    assert first["program"] == "none-linear-high" and first["status"] != "ok"
    assert first["error_class"] == one["steps"][0]["error_class"] is not None
    assert one["private"] is None  # the one-turn episode ends on the failure
    fixed = two["steps"][1]
    assert fixed["program"] == "standardize-linear-high" and fixed["status"] == "ok"
    assert two["valid_final"] == pytest.approx(fixed["score"])
    assert 0.0 < two["private"] <= 1.0 and two["private"] != pytest.approx(fixed["score"])
    assert first["before"].startswith(f"Task {TASK}:") and fixed["before"] == first["report"]
    assert two["executions"] == 2 and one["executions"] == 1
    gains = private_gains({(r["task"], 0, r["turns"]): r for r in records}, [TASK], 1, 2)
    assert gains[0, 0] == pytest.approx(two["private"])  # a failed first turn counts 0


class _AlwaysOk:
    """Every program runs and scores its position in the batch."""

    def predict_outcomes(self, contexts, programs, failure_score=0.0):
        n = len(programs)
        return OutcomePrediction.build(np.tile([1.0, 0, 0, 0, 0], (n, 1)),
                                       np.linspace(0.1, 0.9, n), np.zeros(n),
                                       np.zeros(n, bool), failure_score)  # fmt: skip


def test_fidelity_reads_the_recorded_turns(records) -> None:
    fidelity = turn_fidelity(records, _AlwaysOk())
    assert set(fidelity) == {"1", "2", "all"}  # the one-turn episode is left out
    assert fidelity["1"]["turns"] == 1 == fidelity["2"]["turns"]
    assert fidelity["1"]["status_accuracy"] == 0.0 and fidelity["1"]["real_failures"] == 1
    assert fidelity["1"]["failures_caught"] == 0.0 and fidelity["1"]["error_class_accuracy"] == 0.0
    assert fidelity["2"]["status_accuracy"] == 1.0 == fidelity["2"]["all_ok_baseline"]
    assert fidelity["all"]["status_accuracy"] == fidelity["all"]["all_ok_baseline"] == 0.5


def test_fidelity_with_the_open_space_world_model(records) -> None:
    from wmrl_env.world_models.programs.ml_default import load_ml_world_model

    fidelity = turn_fidelity(records, load_ml_world_model("v4"))
    assert fidelity["all"]["turns"] == 2
    for key in ("1", "2"):
        assert 0.0 <= fidelity[key]["status_accuracy"] <= 1.0


def test_bootstrap_interval_is_fixed_by_its_seed() -> None:
    cells = np.random.default_rng(0).normal(0.05, 0.1, size=(14, 4))
    mean, interval = bootstrap_interval(cells, seed=3)
    assert mean == pytest.approx(cells.mean())
    assert interval == bootstrap_interval(cells, seed=3)[1]
    assert interval[0] < mean < interval[1]


def _script():
    spec = importlib.util.spec_from_file_location("mt_private", ROOT / "benchmarks"
                                                  / "multiturn_private.py")  # fmt: skip
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_finished_run_resumes_without_executing(tmp_path, records, monkeypatch) -> None:
    """Every episode already in the log: the script only reads it (no sandbox call)."""
    from wmrl_env.bench.run_log import fingerprint

    out = tmp_path / "mt.jsonl"
    made_with = fingerprint({"executor": "live"}, resumable=())
    with out.open("w") as handle:
        for task in SUITES["generated"]:
            for record in records:
                row = record | {"task": task, "seed": 0, "made_with": made_with}
                handle.write(json.dumps(row) + "\n")
    script = _script()

    def refuse(*args, **kwargs):
        raise AssertionError("a resumed run executed an episode")

    monkeypatch.setattr("wmrl_env.envs.ml_tasks.multiturn.MLTaskMultiTurnEnv.step", refuse)
    text = script.main(["--tasks", "generated", "--starts", "1", "--turns", "2",
                        "--out", str(out)])  # fmt: skip
    gain = records[1]["private"]
    assert text.startswith(f"private gain after 2 turns over turn 1: {gain:+.3f}")
    assert len(out.read_text().splitlines()) == 2 * len(SUITES["generated"])
    fidelity = script.main(["--tasks", "generated", "--starts", "1", "--turns", "2",
                            "--out", str(out), "--fidelity", "v4"])  # fmt: skip
    assert fidelity.splitlines()[0].startswith("| turn | turns | status accuracy")


def test_a_log_made_otherwise_is_refused_before_any_episode(tmp_path, monkeypatch) -> None:
    """Episodes replayed from the tables, or not stamped, never join a live log: refused
    with the log unchanged; the fidelity reads any log (it runs nothing)."""
    from wmrl_env.bench.run_log import StaleRunLog, fingerprint

    def refuse(*args, **kwargs):
        raise AssertionError("a refused run played an episode")

    monkeypatch.setattr("wmrl_env.envs.ml_tasks.multiturn.MLTaskMultiTurnEnv.step", refuse)
    out = tmp_path / "mt.jsonl"
    row = {"task": TASK, "seed": 0, "turns": 1, "executions": 1, "steps": []}
    script = _script()
    replayed = fingerprint({"executor": "replay"}, resumable=())
    for text, match in ((json.dumps(row | {"made_with": replayed}), r"another config\.executor"),
                        (json.dumps(row), "older log")):  # fmt: skip
        out.write_text(text + "\n")
        with pytest.raises(StaleRunLog, match=match):
            script.main(["--tasks", "generated", "--starts", "1", "--turns", "2",
                         "--out", str(out)])  # fmt: skip
        assert out.read_text() == text + "\n"


def _pool_rows(tasks: set[str]) -> list[str]:
    data = ROOT / "envs" / "ml_tasks" / "data"
    return [line for name in ("pool_v2.jsonl", "pool_real_v1.jsonl", "pool_pretrain_v1.jsonl")
            for line in (data / name).read_text().splitlines()
            if json.loads(line)["task_id"] in tasks]  # fmt: skip


def test_the_pool_tables_replay_the_live_episode(tmp_path, records) -> None:
    """The reviser's programs are in the pool tables: replayed, the live episode's scores
    (validation per turn, private at the end) come back."""
    from wmrl_env.envs.ml_tasks.pool import pool_replay_executor

    table = tmp_path / "pool.jsonl"
    table.write_text("\n".join(_pool_rows({TASK})) + "\n")
    replayed = list(play_starts(TASK, [SEED], 2, executor=pool_replay_executor([table])))
    for record, live in zip(replayed, records, strict=True):
        assert [s["program"] for s in record["steps"]] == [s["program"] for s in live["steps"]]
        assert [s["status"] for s in record["steps"]] == [s["status"] for s in live["steps"]]
        for step, live_step in zip(record["steps"], live["steps"], strict=True):
            assert step["score"] == pytest.approx(live_step["score"], abs=1e-9)
        assert record["private"] == pytest.approx(live["private"], abs=1e-9)


def test_the_transfer_check_runs_on_the_second_suite(tmp_path, monkeypatch) -> None:
    """Tiny sizes on two pretraining tasks and two held-out ones (one real-data): every arm
    trains, and the real episodes report the private score of their best program."""
    from wmrl_env.bench import multiturn
    from wmrl_env.envs.ml_tasks.pool import pool_replay_executor
    from wmrl_env.world_models.programs.ml_default import load_ml_world_model

    train, heldout = ["hr_missing_s1", "hr_periodic_s2"], ["hr_missing_s0", "rd_ecdat_catsup"]
    table = tmp_path / "pool.jsonl"
    table.write_text("\n".join(_pool_rows(set(train + heldout))) + "\n")
    executor = pool_replay_executor([table])
    monkeypatch.setattr(multiturn, "suite_tasks", lambda config: (train, heldout))
    monkeypatch.setattr(multiturn, "_pool_replay_executor", lambda: executor)
    config = multiturn.TransferConfig(
        rounds=1, seeds=1, num_groups=4, group_size=2, anchor_fraction=0.25, max_turns=2,
        eval_episodes=1, eval_every=1, suite="pool",
    )  # fmt: skip
    out = multiturn.run_transfer(config, load_ml_world_model("v4"))
    rows = {row["arm"]: row for row in multiturn.summary_rows(out)}
    assert set(rows) == set(multiturn.ARMS)
    for row in rows.values():
        assert 0.0 < row["real_private"][0] <= 1.0
    assert rows["wm"]["real_executions"][0] == 0
    assert "gain over anchors (paired, private)" in multiturn.markdown(out)
