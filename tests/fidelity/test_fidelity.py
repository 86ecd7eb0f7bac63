"""``wmrl fidelity``: the figures on the suite's table and on a SQLite log written by the
store, checked against independent computations, an oracle and a random world model."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest
from scipy.stats import spearmanr
from sklearn.metrics import roc_auc_score

from wmrl_env.cli import fidelity as cli
from wmrl_env.executors import ExecResult
from wmrl_env.fidelity import log_cases, measure, suite_cases
from wmrl_env.fidelity.metrics import grpo_groups, noise_ceiling
from wmrl_env.fidelity.quality import HEADLINE_CURVE, curve_from_results, predicted_saving
from wmrl_env.store import ExecutionLog
from wmrl_env.world_models import load_default_ml_world_model
from wmrl_env.world_models.outcomes import STATUSES, OutcomePrediction

TASKS = ("wine", "cardata_un", "daag_dengue")  # 36 of 216 runs crashed


@pytest.fixture(scope="module")
def cases():
    return suite_cases(tasks=TASKS)


@pytest.fixture(scope="module")
def v3_result(cases):
    return measure(load_default_ml_world_model(), cases, seed=3)


class Truth:
    """A world model that knows each execution's outcome (the oracle) or, with ``rng``,
    guesses at random; it reads the real outcomes from ``cases``."""

    def __init__(self, cases, rng=None) -> None:
        pairs = zip(cases.contexts, cases.programs, strict=True)
        self.rows = {pair: i for i, pair in enumerate(pairs)}
        self.cases, self.rng = cases, rng

    def predict(self, contexts, artifacts):
        return np.zeros(len(artifacts))

    def predict_outcomes(self, contexts, artifacts, failure_score=0.0):
        rows = [self.rows[pair] for pair in zip(contexts, artifacts, strict=True)]
        n = len(rows)
        probs = np.zeros((n, len(STATUSES)))
        if self.rng is None:
            probs[np.arange(n), [STATUSES.index(self.cases.status[i]) for i in rows]] = 1.0
            score = np.nan_to_num(self.cases.score[rows], nan=0.5)
            std = np.full(n, 1e-9)
        else:
            probs[:, [0, 2]] = self.rng.dirichlet([1.0, 1.0], size=n)
            score, std = self.rng.random(n), np.full(n, 0.3)
        return OutcomePrediction.build(probs, score, std, np.zeros(n, bool), failure_score)


def test_figures_match_independent_computations(v3_result, cases) -> None:
    figures, outcome = v3_result.figures, v3_result.outcome
    failed = cases.status != "ok"
    assert figures["cases"] == len(cases) == 216 and figures["tasks"] == 3
    assert figures["status"]["accuracy"] == pytest.approx(np.mean(outcome.status() == cases.status))
    assert figures["status"]["failure_auc"] == pytest.approx(roc_auc_score(failed, outcome.p_fail))
    ok = cases.status == "ok"
    mae = np.mean(np.abs(outcome.score[ok] - cases.score[ok]))
    assert figures["score"]["mae"] == pytest.approx(mae)
    z = np.abs(outcome.score[ok] - cases.score[ok]) / outcome.std[ok]
    assert figures["score"]["coverage_1sd"] == pytest.approx(np.mean(z <= 1))
    # the same groups, drawn again with the same seed, give the same mean Spearman
    rng = np.random.default_rng(3)
    groups = grpo_groups(cases.task_ids, 8, rng)
    real = cases.reward(0.0)
    values = [spearmanr(outcome.expected_reward[g], real[g]).statistic for g in groups
              if np.ptp(real[g]) > 0]  # fmt: skip
    assert figures["within_group_spearman"]["mean"] == pytest.approx(np.mean(values))
    assert figures["within_group_spearman"]["groups"] == len(values) == 27
    assert figures["noise_ceiling"]["spearman"] is None  # the table ran each program once
    json.dumps(figures)  # plain data


def test_the_oracle_scores_perfectly_and_a_random_model_scores_chance(cases) -> None:
    oracle = measure(Truth(cases), cases).figures
    assert oracle["status"]["accuracy"] == 1.0 and oracle["status"]["failure_auc"] == 1.0
    assert oracle["score"]["mae"] == pytest.approx(0.0, abs=1e-12)
    assert oracle["within_group_spearman"]["mean"] == pytest.approx(1.0)
    assert oracle["predicted_saving"]["saving"] == pytest.approx(HEADLINE_CURVE[-1][1])
    # a random model: AUC and Spearman at chance. Under the null a group of 8's Spearman has
    # sd 1/sqrt(7); over 27 groups the mean's sd is 0.073; an AUC over 216 runs with its
    # failures (36 of 216) has sd sqrt(217 / (12 * 36 * 180)) = 0.053. Four sd either way.
    guess = measure(Truth(cases, np.random.default_rng(0)), cases).figures
    assert abs(guess["within_group_spearman"]["mean"]) < 4 * 0.073
    assert abs(guess["status"]["failure_auc"] - 0.5) < 4 * 0.053


def test_v3_on_held_out_tasks_tells_failures_and_orders_groups(v3_result) -> None:
    """Bounds several standard errors under the measured figures (accuracy 0.995, AUC 0.996,
    Spearman 0.61 on all 39 held-out tasks)."""
    figures = v3_result.figures
    assert figures["status"]["accuracy"] > figures["status"]["majority_accuracy"]
    assert figures["status"]["failure_auc"] > 0.9
    assert figures["within_group_spearman"]["mean"] > 0.3
    assert 0.5 < figures["score"]["coverage_1sd"] < figures["score"]["coverage_2sd"] <= 1.0


def test_anchors_are_taught_and_left_out_of_the_figures(cases) -> None:
    class Recorder(Truth):
        def update(self, contexts, artifacts, real):
            self.taught = list(contexts), list(artifacts), np.asarray(real)

    model = Recorder(cases)
    figures = measure(model, cases, anchor_groups=2, failure_score=-1.0).figures
    contexts, programs, real = model.taught
    assert len(programs) == 3 * 16 and figures["cases"] == len(cases) - 48
    rows = [model.rows[pair] for pair in zip(contexts, programs, strict=True)]
    np.testing.assert_array_equal(real, cases.reward(-1.0)[rows])
    with pytest.raises(ValueError, match="learns"):
        measure(Truth(cases), cases, anchor_groups=1)
    with pytest.raises(TypeError, match="predict_outcomes"):
        measure(object(), cases)


# ----------------------------------------------------------------------- a user's log
def write_log(path, cases, noise: float, rng) -> None:
    """The real results of the suite's table for ``cases``, recorded through the store, each
    ``ok`` run twice with independent score noise of sd ``noise`` (what a repeated run of a
    noisy program gives), plus rows the report must leave out."""
    with ExecutionLog(path) as log:
        for repeat in range(2):
            for i, program in enumerate(cases.programs):
                status = str(cases.status[i])
                score = cases.score[i] + noise * rng.normal() if status == "ok" else np.nan
                message = "exit status 1: ValueError: bad" if status == "crashed" else ""
                result = ExecResult(f"{repeat}-{i}", status=status, score=score, message=message)
                log.record(result, artifact=program, task_id=cases.task_ids[i], run_id="r")
        log.record(ExecResult("x", status="error"), artifact="print(1)", task_id="wine")
        log.record(ExecResult("y", status="ok", score=0.5), artifact="print(1)")
        log.record(ExecResult("z", status="crashed", message="exit status 1: SyntaxError"),
                   artifact="def f(:", task_id="wine", run_id="r")  # fmt: skip


def test_a_sqlite_log_written_by_the_store(tmp_path, cases) -> None:
    sigma = 0.02
    path = tmp_path / "log.sqlite"
    write_log(path, cases, sigma, np.random.default_rng(0))
    logged = log_cases(path)
    assert len(logged) == 2 * len(cases) + 1
    assert logged.skipped == {"no task_id": 1, "infrastructure failure": 1}
    assert logged.contexts[0] == cases.contexts[0]  # a suite task reads its description
    assert logged.status[-1] == "does_not_parse"
    figures = measure(load_default_ml_world_model(), logged).figures
    assert figures["status"]["known"] == figures["status"]["known_correct"] == 1
    ceiling = figures["noise_ceiling"]
    assert ceiling["repeated_programs"] == len(cases)
    # both runs of an ok program carry noise of sd sigma: the pooled within-program sd
    # estimates sigma over ok runs and is 0 over failed ones (their reward is fixed)
    ok_share = np.mean(cases.status == "ok")
    expected = sigma * np.sqrt(ok_share)
    dof = len(cases)
    assert abs(ceiling["reward_noise_std"] - expected) < 4 * expected / np.sqrt(2 * dof)
    assert 0.8 < ceiling["spearman"] < 1.0  # small noise: nearly the same order
    assert len(log_cases(path, run_id="r")) == len(logged)
    with pytest.raises(FileNotFoundError):
        log_cases(tmp_path / "missing.sqlite")


def test_noise_ceiling_of_exact_repeats_is_one(cases) -> None:
    both = cases.subset(np.concatenate([np.arange(len(cases))] * 2))
    ceiling = noise_ceiling(both, 0.0, 8, np.random.default_rng(0))
    assert ceiling["spearman"] == pytest.approx(1.0) and ceiling["reward_noise_std"] == 0.0


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="wmrl")
    cli.register(parser.add_subparsers(dest="command", required=True))
    return parser


def test_the_cli_on_a_log_writes_the_json_and_the_plot(tmp_path, cases, capsys) -> None:
    pytest.importorskip("matplotlib")
    path = tmp_path / "log.sqlite"
    write_log(path, cases.subset(np.arange(72)), 0.02, np.random.default_rng(1))
    args = parser().parse_args(["fidelity", "--log", str(path), "--out", str(tmp_path / "out")])
    assert args.func(args) == 0
    printed = capsys.readouterr().out
    assert "status accuracy" in printed and "within-group Spearman" in printed
    figures = json.loads((tmp_path / "out" / "fidelity.json").read_text())
    direct = measure(load_default_ml_world_model(), log_cases(path)).figures
    assert figures["status"]["accuracy"] == pytest.approx(direct["status"]["accuracy"])
    assert figures["noise_ceiling"]["spearman"] == pytest.approx(
        direct["noise_ceiling"]["spearman"]
    )
    assert (tmp_path / "out" / "fidelity.png").stat().st_size > 10_000


def test_the_cli_refuses_bad_input_clearly(tmp_path) -> None:
    for argv, message in [
        (["--log", str(tmp_path / "none.sqlite")], "no execution log"),
        (["--world-model", "nonsense"], "expected one of"),
        (["--world-model", "no_such_module_xyz:make"], "no_such_module_xyz"),
        (["--group-size", "1"], "--group-size"),
        (["--split", "nope"], "split must be one of"),
    ]:
        args = parser().parse_args(["fidelity", *argv, "--out", str(tmp_path)])
        with pytest.raises(SystemExit, match=message):
            args.func(args)


def test_the_quality_curve_reading() -> None:
    assert predicted_saving(0.832)["saving"] == pytest.approx(2.12)
    assert predicted_saving(0.765)["saving"] == pytest.approx((1.523 + 2.12) / 2)
    assert predicted_saving(0.6)["saving"] is None and predicted_saving(None)["saving"] is None
    assert predicted_saving(1.0)["caveats"]


def test_the_built_in_curve_is_the_committed_headline_runs() -> None:
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "docs/figures/bench_pertask_full/results.json"
    points = curve_from_results(path)
    np.testing.assert_allclose(np.array(points), np.array(HEADLINE_CURVE), atol=6e-4)


def test_the_cli_on_the_pool_table_measures_v4(tmp_path, capsys) -> None:
    """``--pool`` reads a pool table (here two tasks of the committed one) scored as the pool
    suite rewards, and measures v4 by default; the figures equal a direct measurement."""
    from wmrl_env.bench.pool_suite import default_pool_table
    from wmrl_env.envs.ml_tasks.pool import read_pool
    from wmrl_env.fidelity import pool_cases
    from wmrl_env.world_models.programs.ml_default import load_ml_world_model

    keep = {"hr_missing_s0", "hr_periodic_s0"}
    rows = [r for r in read_pool(default_pool_table()) if r["task_id"] in keep]
    table = tmp_path / "pool.jsonl"
    table.write_text("".join(json.dumps(r) + "\n" for r in rows))
    found = pool_cases(table)
    assert set(found.task_ids) == keep and len(found) == len(rows)
    assert np.nanmax(found.score) == 1.0 and set(found.status) <= set(STATUSES)
    args = parser().parse_args(["fidelity", "--pool", str(table), "--no-plot",
                                "--out", str(tmp_path / "out")])  # fmt: skip
    assert args.func(args) == 0
    figures = json.loads((tmp_path / "out" / "fidelity.json").read_text())
    direct = measure(load_ml_world_model("v4"), found).figures
    assert figures["status"]["accuracy"] == pytest.approx(direct["status"]["accuracy"])
    assert figures["status"]["accuracy"] > 0.8
    with pytest.raises(SystemExit, match="no pool table"):
        bad = parser().parse_args(["fidelity", "--pool", str(tmp_path / "x.jsonl")])
        bad.func(bad)


def test_the_cli_default_is_world_model_v4_on_the_pool_suite(tmp_path) -> None:
    args = parser().parse_args(["fidelity", "--no-plot", "--out", str(tmp_path)])
    assert args.func(args) == 0
    report = json.loads((tmp_path / "fidelity.json").read_text())
    assert report["world_model"] == "OpenSpaceWorldModel"
    assert report["source"].startswith("pool table pool_v2.jsonl")
    first = parser().parse_args(["fidelity", "--split", "heldout", "--no-plot", "--out",
                                 str(tmp_path / "v1")])  # fmt: skip
    assert first.func(first) == 0
    report = json.loads((tmp_path / "v1" / "fidelity.json").read_text())
    assert report["world_model"] == "ProgramProfileWorldModel"
