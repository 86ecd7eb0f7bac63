"""``wmrl bench``: the report's arithmetic on constructed curves, the config and command
line, and tiny end-to-end runs of the regime on the replay table."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from scipy import stats

from wmrl_env.bench.config import ARMS, BenchConfig
from wmrl_env.bench.records import RunRecord, StepRecord
from wmrl_env.bench.report import (
    gain_over_anchors,
    markdown_table,
    score_at,
    seconds_to_reach,
    summarise,
)
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


def test_speedup_at_95_and_90_percent_of_the_real_final_score() -> None:
    # real ends at 1.0: it reaches 1.0 and 0.95 at 40 s, 0.9 at 30 s; the arm at 4, 3, 2 s
    runs = [
        make_run("real", 0, [10, 20, 30, 40], [0.5, 0.8, 0.9, 1.0]),
        make_run("ppi", 0, [1, 2, 3, 4], [0.85, 0.92, 0.96, 1.0]),
    ]
    ppi = summarise(runs, tolerance=0.0)["ppi"]
    assert ppi.speedup_at == pytest.approx({"final": 10.0, "95%": 40 / 3, "90%": 15.0})
    assert ppi.seconds_at == {"final": 4.0, "95%": 3.0, "90%": 2.0}
    assert ppi.speedup == ppi.speedup_at["final"]


def test_a_baseline_reached_before_any_real_execution_gives_no_speedup() -> None:
    runs = [make_run("real", 0, [0, 10], [0.9, 0.9]), make_run("ppi", 0, [0, 1], [0.9, 0.9])]
    assert summarise(runs)["ppi"].speedup_at["final"] is None


def test_reaching_needs_staying() -> None:
    assert seconds_to_reach(np.array([1.0, 2.0]), np.array([0.9, 0.1]), 0.5) is None


def test_score_at_reads_the_last_evaluation_within_the_seconds() -> None:
    run = make_run("anchors", 0, [0, 10, 20], [0.5, 0.6, 0.7])
    assert score_at(run, 0.0) == 0.5
    assert score_at(run, 9.99) == 0.5 and score_at(run, 10.0) == 0.6
    assert score_at(run, 1e9) == 0.7
    assert np.isnan(score_at(make_run("anchors", 0, [5], [0.5]), 1.0))


def test_gain_over_anchors_is_paired_by_seed_at_equal_real_seconds() -> None:
    anchors = [
        make_run("anchors", 0, [0, 10, 20], [0.5, 0.6, 0.7]),
        make_run("anchors", 1, [0, 10, 20], [0.5, 0.7, 0.8]),
        make_run("anchors", 2, [0, 10, 20], [0.5, 0.6, 0.6]),
    ]
    arm = [
        # ends at 18 s: its 0.9 against anchors at 18 s (0.6): +0.3
        make_run("ppi", 0, [0, 5, 18], [0.5, 0.8, 0.9]),
        # ends at 25 s, anchors at 20: its score at 20 s (0.7) against anchors' 0.8: -0.1
        make_run("ppi", 1, [0, 10, 25], [0.5, 0.7, 0.75]),
        make_run("ppi", 2, [0, 10, 20], [0.5, 0.6, 0.7]),  # +0.1
    ]
    mean, ci = gain_over_anchors(arm, anchors)
    gains = np.array([0.3, -0.1, 0.1])
    half = stats.t.ppf(0.975, 2) * gains.std(ddof=1) / np.sqrt(3)
    assert mean == pytest.approx(0.1)
    assert ci == pytest.approx((0.1 - half, 0.1 + half))  # unclipped: a gain may be negative
    assert gain_over_anchors(arm, []) == (None, None)
    summary = summarise(anchors + arm)
    assert summary["ppi"].gain_over_anchors == pytest.approx(0.1)
    assert summary["anchors"].gain_over_anchors is None
    table = markdown_table(summary)
    assert "(baseline)" in table and "+0.100" in table


def test_an_arm_without_real_cost_has_no_gain_at_equal_real_cost() -> None:
    """The old report read ``wm`` at 0 s against the anchors arm's untrained start (+0.3
    here, +0.251 in the headline): a zero-cost arm's gain is not applicable."""
    anchors = [make_run("anchors", 0, [0, 10], [0.4, 0.9])]
    wm = [make_run("wm", 0, [0, 0], [0.4, 0.7])]
    assert gain_over_anchors(wm, anchors) == (None, None)
    summary = summarise(anchors + wm)
    assert summary["wm"].gain_over_anchors is None
    assert "| wm | 0.700 | 0 | 0 | n/a |" in markdown_table(summary)


def test_the_greedy_score_breaks_ties_at_random() -> None:
    """An untrained policy (uniform: every program tied) scores the uniform mean, not the
    first program's score (the old report's 0.583 against the uniform mean 0.636)."""
    from wmrl_env.bench.suite import ScoreTable

    table = ScoreTable(("a", "b"), np.array([[0.1, 0.5, 0.9], [1.0, 0.2, 0.3]]))
    assert table.greedy(np.full((2, 3), 1 / 3)) == pytest.approx(np.mean([0.5, 0.5]))
    assert table.greedy(np.array([[0.2, 0.4, 0.4], [0.5, 0.3, 0.2]])) == pytest.approx(
        np.mean([0.7, 1.0])
    )


def test_config_checks_and_cli_overrides() -> None:
    with pytest.raises(ValueError, match="unknown arms"):
        BenchConfig(arms=("magic",))
    with pytest.raises(ValueError, match="world_model"):
        BenchConfig(world_model="oracle")
    with pytest.raises(ValueError, match="anchor_fraction"):
        BenchConfig(anchor_fraction=0.0)
    args = build_parser().parse_args(["bench", "--full", "--seeds", "2", "--arms", "anchors"])
    config = config_from_args(args)
    assert config.seeds == 2 and config.executor == "replay" and config.num_groups == 20
    assert config.arms == ("anchors",)
    args = build_parser().parse_args(["bench", "--world-model", "random", "--live-check", "0"])
    config = config_from_args(args)
    assert config.world_model == "random" and config.live_check == 0
    assert BenchConfig.quick().live_check > 0 and BenchConfig.quick().seeds >= 3


def test_the_cross_task_regime_takes_an_optimizer() -> None:
    """Adam by default (its figures reproduce), SGD on request, recorded in the config and
    handed to the GRPO loop; the robot bench still refuses the flag."""
    from wmrl_env.bench.runner import grpo_config
    from wmrl_env.cli.bench import pertask_config_from_args, robot_config_from_args

    parse = build_parser().parse_args
    assert config_from_args(parse(["bench", "--regime", "crosstask"])).optimizer == "adam"
    config = config_from_args(parse(["bench", "--regime", "crosstask", "--optimizer", "sgd"]))
    assert config.optimizer == "sgd" and config.to_dict()["optimizer"] == "sgd"
    assert grpo_config(config, seed=0).optimizer == "sgd"
    assert pertask_config_from_args(parse(["bench", "--optimizer", "adam"])).optimizer == "adam"
    with pytest.raises(ValueError, match="optimizer"):
        robot_config_from_args(parse(["bench", "--domain", "robosuite", "--optimizer", "sgd"]))
    with pytest.raises(ValueError, match="optimizer"):
        BenchConfig(optimizer="rmsprop")


def test_the_anchors_arm_executes_the_fused_arms_share_of_groups() -> None:
    from wmrl_env.bench.runner import groups_per_round

    config = BenchConfig(num_groups=20, anchor_fraction=0.1)
    assert groups_per_round(config, "anchors") == 2 and groups_per_round(config, "wmrl") == 20
    assert groups_per_round(BenchConfig(num_groups=4, anchor_fraction=0.1), "anchors") == 1


@pytest.mark.torch
def test_tiny_regime_on_replay_writes_consistent_outputs(tmp_path) -> None:
    """Every arm, 2 seeds, a few rounds, a useless world model (no encoder to load)."""
    from wmrl_env.bench import run_bench
    from wmrl_env.bench.suite import sample_tasks, split_tasks

    config = BenchConfig(
        train_tasks=6,
        heldout_tasks=4,
        world_model="random",
        seeds=2,
        iterations=3,
        num_groups=4,
        group_size=3,
        anchor_fraction=0.25,
        eval_every=1,
        out=str(tmp_path),
    )
    result = run_bench(config)
    results = json.loads((tmp_path / "results.json").read_text())
    assert list(results["arms"]) == list(ARMS)
    lines = (tmp_path / "runs.jsonl").read_text().splitlines()
    runs = [RunRecord.from_dict(json.loads(line)) for line in lines]
    assert {(r.arm, r.seed) for r in runs} == {(arm, s) for arm in ARMS for s in (0, 1)}
    heldout = set(sample_tasks(split_tasks("heldout"), 4))
    assert len(heldout) == 4 and results["train_tasks"] == 6 and results["heldout_tasks"] == 4
    for run in runs:
        assert [s.step for s in run.evaluated] == [0, 1, 2, 3]
        assert all(0.0 <= s.true_score <= 1.0 for s in run.evaluated)
        assert set(run.final_programs) == heldout
    for arm, row in results["arms"].items():
        for key in ("final_score_mean", "final_score_ci", "real_exec_seconds", "speedup"):
            assert key in row, (arm, key)
        assert ("gain_over_anchors" in row) and (row["gain_over_anchors"] is None) == (
            arm in ("anchors", "wm")  # the baseline, and an arm without real cost: n/a
        )
        arm_runs = [r for r in runs if r.arm == arm]
        assert row["real_exec_seconds"] == pytest.approx(
            np.mean([r.steps[-1].real_exec_seconds for r in arm_runs])
        )
    arms = results["arms"]
    # real executes every group of every round, anchors and the fused arms one group a round
    assert arms["real"]["real_executions"] == 3 * 4 * 3
    for arm in ("anchors", "debias", "denoise", "wmrl", "ppi"):
        assert arms[arm]["real_executions"] == 3 * 1 * 3, arm
        assert arms[arm]["real_exec_seconds"] > 0
    assert arms["wm"]["real_exec_seconds"] == 0
    assert result.live_checks == [] and results["live_check"] == []
    lines = results["reference_lines"]
    assert lines == pytest.approx(result.reference_lines)
    oracle = lines["oracle (exhaustive search, 72 executions)"]
    assert oracle == pytest.approx(1.0) and "random search@8" in lines
    from wmrl_env.bench.ceiling import CEILING_LINE

    assert 0.0 < lines[CEILING_LINE] <= oracle
    assert results["supervised_ceiling"]["model"] in results["supervised_ceiling"]["cv_scores"]
    assert "Supervised ceiling" in (tmp_path / "results.md").read_text()
    assert lines["uniform policy (expected) = untrained policy, ties at random"] < oracle
    # the untrained (uniform) policy's greedy score is the uniform mean: ties at random
    assert runs[0].steps[0].true_score == pytest.approx(
        lines["uniform policy (expected) = untrained policy, ties at random"]
    )
    assert (tmp_path / "score_vs_real_seconds.png").stat().st_size > 1000
    assert BenchConfig(**json.loads((tmp_path / "config.json").read_text())) == config


@pytest.mark.torch
def test_the_cross_task_regime_keeps_finished_runs(tmp_path, monkeypatch) -> None:
    """A rerun into the same folder keeps the finished runs and runs only the missing seeds;
    a folder made with another configuration, a per-task folder and an unstamped log are
    refused (exit 2 from the command line) with every byte left as it was."""
    from wmrl_env.bench import run_bench, runner
    from wmrl_env.bench.run_log import StaleRunLog
    from wmrl_env.cli.main import main

    config = BenchConfig(
        arms=("wm",), train_tasks=6, heldout_tasks=4, world_model="random", seeds=1,
        iterations=2, num_groups=2, group_size=3, eval_every=1, out=str(tmp_path / "cross"),
    )  # fmt: skip
    run_bench(config)
    log = tmp_path / "cross" / "runs.jsonl"
    first = log.read_bytes()
    ran = []
    run_one = runner.run_one
    monkeypatch.setattr(runner, "run_one", lambda c, arm, seed, *a, **k: ran.append(seed)
                        or run_one(c, arm, seed, *a, **k))  # fmt: skip
    result = run_bench(dataclasses.replace(config, seeds=2))
    assert ran == [1] and log.read_bytes().startswith(first)
    assert [(r.arm, r.seed) for r in result.runs] == [("wm", 0), ("wm", 1)]
    assert result.runs[0] == RunRecord.from_dict(json.loads(first))
    kept, config_text = log.read_bytes(), (tmp_path / "cross" / "config.json").read_text()
    with pytest.raises(StaleRunLog, match=r"config\.iterations"):
        run_bench(dataclasses.replace(config, iterations=3))
    assert log.read_bytes() == kept and ran == [1]
    assert (tmp_path / "cross" / "config.json").read_text() == config_text
    pertask = tmp_path / "pertask"
    pertask.mkdir()
    from wmrl_env.bench.pertask_bench import run_fingerprint
    from wmrl_env.bench.pertask_config import PerTaskConfig

    row = {"key": ["main", "wm", 0, 1.0, "default"], "run": json.loads(first),
           "made_with": run_fingerprint(PerTaskConfig())}  # fmt: skip
    (pertask / "runs.jsonl").write_text(json.dumps(row) + "\n")
    unstamped = tmp_path / "old"
    unstamped.mkdir()
    (unstamped / "runs.jsonl").write_text(json.dumps(RunRecord("wm", 0).to_dict()) + "\n")
    for folder in (pertask, unstamped):
        before = (folder / "runs.jsonl").read_bytes()
        assert main(["bench", "--regime", "crosstask", "--out", str(folder)]) == 2
        assert (folder / "runs.jsonl").read_bytes() == before
        assert sorted(p.name for p in folder.iterdir()) == ["runs.jsonl"]


def _table_is_current() -> bool:
    from wmrl_env.envs.ml_tasks.tables import table_path

    return table_path().is_file()


@pytest.mark.slow
@pytest.mark.skipif(
    not _table_is_current(),
    reason="only the old table_v0 is committed: it predates the suite's seeded perturbation of "
    "the task data, so live scores differ until table_v1 is built (issue 13)",
)
def test_the_table_scores_a_program_exactly_as_a_live_run_does() -> None:
    """Replayed rewards and held-out scores are table look-ups: a live sandbox run of the
    same program gives the same score (the quick default's live check, on two programs)."""
    from wmrl_env.bench.live_check import live_check

    checks = live_check({"wine": "standardize-svm-mid", "diabetes": "none-forest-high"})
    for check in checks:
        assert check.status == "ok", check
        assert check.matches, check
        assert check.live_seconds > 0


def test_the_task_description_module_does_not_import_the_task_module() -> None:
    """The suite's one import circle (description.py <-> tasks.py, hidden behind a deferred
    import and ``TYPE_CHECKING``) is gone: description.py reads a protocol, tasks.py imports
    it at the top."""
    import ast
    from pathlib import Path

    import wmrl_env.envs.ml_tasks as suite

    tree = ast.parse((Path(suite.__file__).parent / "description.py").read_text())
    imported = {
        node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
    }
    assert "tasks" not in imported and not any(m.endswith(".tasks") for m in imported)


# ---------------------------------------------------------------- the per-task regime


def test_the_balanced_anchor_draw_realises_its_inclusion_probabilities() -> None:
    """Draw frequencies match the stated pi (what PPI's 1/pi needs), every pi > 0, and the
    least-executed tasks are favoured. Tolerance: 4 binomial standard errors per task over
    N draws (a false alarm on any of the 6 tasks has probability < 4e-4)."""
    from wmrl_env.bench.pertask import draw_anchor_tasks

    executions = np.array([0, 0, 8, 8, 16, 8])
    rng = np.random.default_rng(0)
    n = 20_000
    counts = np.zeros(6)
    for _ in range(n):
        chosen, pi = draw_anchor_tasks(executions, 2, "balanced", rng, 0.2)
        assert chosen.sum() == 2
        counts += chosen
    assert pi.sum() == pytest.approx(2.0) and (pi >= 2 * 0.2 / 6 - 1e-12).all()
    assert pi[0] == pi[1] > 0.5 > pi[2]
    assert np.abs(counts / n - pi).max() < 4 * np.sqrt(pi * (1 - pi) / n).max()
    chosen, pi = draw_anchor_tasks(executions, 2, "random", rng, 0.2)
    assert pi.tolist() == [2 / 6] * 6 and chosen.sum() == 2


def test_the_ucb_anchor_draws_realise_their_inclusion_probabilities() -> None:
    """ "ucb" and "balanced-ucb": pi sums to m, every pi >= m * mix / T, the upper bound
    (and, balanced, the least-executed tasks) favoured; draw frequencies match pi within 4
    binomial standard errors per task (a false alarm on any of the 12 checks has
    probability < 8e-4)."""
    from wmrl_env.bench.pertask import draw_anchor_tasks

    executions = np.array([0, 0, 8, 8, 16, 8])
    upper = np.array([0.0, 0.3, 0.5, 0.1, 0.0, 0.2])
    rng = np.random.default_rng(0)
    n = 20_000
    for how in ("ucb", "balanced-ucb"):
        counts = np.zeros(6)
        for _ in range(n):
            chosen, pi = draw_anchor_tasks(executions, 2, how, rng, 0.2, upper)
            assert chosen.sum() == 2
            counts += chosen
        assert pi.sum() == pytest.approx(2.0) and (pi >= 2 * 0.2 / 6 - 1e-12).all()
        assert np.abs(counts / n - pi).max() < 4 * np.sqrt(pi * (1 - pi) / n).max()
        if how == "ucb":
            assert pi[2] > pi[1] > pi[5] > pi[3] > pi[0] == pi[4]
        else:  # only tasks 0 and 1 are least executed; task 1 has the upper bound
            assert pi[1] > 0.5 > pi[0] == pi[2] == pi[5]
    with pytest.raises(ValueError, match="upper bounds"):
        draw_anchor_tasks(executions, 2, "ucb", rng, 0.2)
    _, pi = draw_anchor_tasks(executions, 2, "balanced-ucb", rng, 0.2, np.zeros(6))
    _, balanced = draw_anchor_tasks(executions, 2, "balanced", rng, 0.2)
    assert pi == pytest.approx(balanced)  # no upper bound above the best: balance alone


def test_the_tabular_policy_gradient_is_that_of_the_weighted_log_likelihood() -> None:
    """One SGD step equals lr * d/dlogits of mean_task-trajectories(A * log pi(a)),
    checked by central finite differences."""
    from wmrl_env.bench.tabular import TabularPolicy

    tasks, programs = np.array([0, 0, 0, 2]), np.array([1, 3, 1, 0])
    advantages = np.array([0.5, -1.0, 0.25, 2.0])
    policy = TabularPolicy(3, 4, learning_rate=0.1, seed=0)
    policy.logits = np.random.default_rng(1).normal(size=(3, 4))
    start = policy.logits.copy()

    def objective(logits: np.ndarray) -> float:
        log_pi = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
        terms = advantages * log_pi[tasks, programs]
        return sum(terms[tasks == t].mean() for t in np.unique(tasks))

    numeric = np.zeros_like(start)
    for index in np.ndindex(start.shape):
        step = np.zeros_like(start)
        step[index] = 1e-6
        numeric[index] = (objective(start + step) - objective(start - step)) / 2e-6
    policy.update(tasks, programs, advantages)
    assert policy.logits - start == pytest.approx(0.1 * numeric, abs=1e-8)
    assert (policy.logits[1] == start[1]).all()  # a task without a trajectory stays
    adam = TabularPolicy(3, 4, learning_rate=0.1, optimizer="adam")
    adam.update(tasks, programs, advantages)  # Adam's first step: lr * sign(gradient)
    moved = np.abs(numeric) > 1e-9
    assert adam.logits[moved] == pytest.approx(0.1 * np.sign(numeric[moved]), rel=1e-6)


def test_a_dialled_world_model_mixes_the_model_and_the_truth() -> None:
    from wmrl_env.bench.world_model import MixedWorldModel
    from wmrl_env.world_models.base import Prediction

    class Constant:
        updates = 0

        def predict(self, contexts, artifacts):
            return Prediction(np.full(len(artifacts), 0.2), np.full(len(artifacts), 0.1))

        def update(self, contexts, artifacts, real):
            Constant.updates += 1

    truth = {("t", "a"): 1.0, ("t", "b"): 0.0}
    mixed = MixedWorldModel(Constant(), truth, weight=0.25)
    prediction = mixed.predict(["t", "t"], ["a", "b"])
    assert prediction.scores == pytest.approx([0.75 * 0.2 + 0.25, 0.75 * 0.2])
    assert prediction.std == pytest.approx([0.075, 0.075])
    mixed.update(["t"], ["a"], np.array([1.0]))
    assert Constant.updates == 1
    with pytest.raises(KeyError, match="no true score"):
        mixed.predict(["t"], ["c"])
    with pytest.raises(ValueError, match="weight"):
        MixedWorldModel(Constant(), truth, weight=1.5)


def test_pertask_config_and_cli() -> None:
    from wmrl_env.bench.pertask_config import PerTaskConfig
    from wmrl_env.cli.bench import pertask_config_from_args

    for bad in ({"world_model": "mix:2"}, {"anchor_draw": "loudest"}, {"optimizer": "rmsprop"}):
        with pytest.raises(ValueError):
            PerTaskConfig(**bad)
    parser = build_parser()
    args = parser.parse_args(
        ["bench", "--world-model", "mix:0.5", "--anchor-draw", "random", "--budgets", "4", "8",
         "--learning-rates", "0.1", "1", "--optimizer", "adam", "--seeds", "2"]
    )  # fmt: skip
    config = pertask_config_from_args(args)
    assert (config.mix_weight, config.anchor_draw, config.budgets) == (0.5, "random", (4, 8))
    assert config.learning_rates == (0.1, 1.0) and config.optimizer == "adam"
    assert pertask_config_from_args(parser.parse_args(["bench", "--full"])).budgets[-1] == 64
    args = parser.parse_args(
        ["bench", "--anchor-draw", "balanced-ucb", "--ucb-kappa", "2", "--execute-per-group",
         "2", "--screening", "top", "--arms", "real", "anchors", "wmrl"]
    )  # fmt: skip
    config = pertask_config_from_args(args)
    assert (config.anchor_draw, config.ucb_kappa) == ("balanced-ucb", 2.0)
    assert (config.execute_per_group, config.screening) == (2, "top")
    assert PerTaskConfig().execute_per_group == 0 and PerTaskConfig().screening == "pps"
    with pytest.raises(SystemExit):
        parser.parse_args(["bench", "--screening", "best"])
    assert PerTaskConfig().gate_scope == "pooled"
    args = parser.parse_args(["bench", "--gate-scope", "cluster"])
    assert pertask_config_from_args(args).gate_scope == "cluster"
    with pytest.raises(SystemExit):
        parser.parse_args(["bench", "--gate-scope", "task"])
    with pytest.raises(ValueError, match="--regime pertask"):
        config_from_args(
            parser.parse_args(["bench", "--regime", "crosstask", "--gate-scope", "cluster"])
        )
    for bad, message in (
        ({"execute_per_group": 8}, "execute_per_group"),
        ({"execute_per_group": -1}, "execute_per_group"),
        ({"ucb_kappa": -1.0}, "ucb_kappa"),
        ({"gate_scope": "task"}, "gate_scope"),
        ({"execute_per_group": 2, "screening": "top"}, "ppi"),  # the default arms hold ppi
        ({"execute_per_group": 1}, "cannot run the wmrl arm"),  # ... and wmrl
        ({"execute_per_group": 1, "arms": ("anchors",), "quality_weights": (0.5,)}, "wmrl arm"),
    ):
        with pytest.raises(ValueError, match=message):
            PerTaskConfig(**bad)
    PerTaskConfig(execute_per_group=1, arms=("anchors", "debias", "ppi"))
    with pytest.raises(ValueError, match="--regime pertask"):
        config_from_args(
            parser.parse_args(["bench", "--regime", "crosstask", "--execute-per-group", "2"])
        )
    with pytest.raises(ValueError, match="--regime crosstask"):
        pertask_config_from_args(parser.parse_args(["bench", "--iterations", "3"]))
    with pytest.raises(ValueError, match="--regime pertask"):
        config_from_args(parser.parse_args(["bench", "--regime", "crosstask", "--rounds", "3"]))
    with pytest.raises(ValueError, match="pertask only"):
        config_from_args(parser.parse_args(["bench", "--world-model", "mix:0.5"]))


def test_tiny_pertask_regime_on_replay(tmp_path) -> None:
    """Every arm on 4 held-out tasks with a random world model, a two-rate sweep, the
    common-rate rows, a quality-curve point with an exact world model (mix:1), the reference
    lines; rerunning the same folder resumes (nothing is run again)."""
    from wmrl_env.bench.pertask_bench import run_pertask_bench
    from wmrl_env.bench.pertask_config import PerTaskConfig

    config = PerTaskConfig(
        suite="v1", heldout_tasks=4, world_model="random", seeds=2, rounds=8, group_size=4,
        anchor_fraction=0.5, learning_rates=(0.3, 3.0), budgets=(2, 4), quality_weights=(1.0,),
        bootstrap=200, out=str(tmp_path),
    )  # fmt: skip
    result = run_pertask_bench(config)
    results = json.loads((tmp_path / "results.json").read_text())
    arms = results["arms"]
    assert set(results["rates"]) >= set(ARMS) and set(results["rates"].values()) <= {0.3, 3.0}
    # real executes every task's group each round (4 per task), anchors 2 of 4 groups (2)
    assert arms["real"]["real_executions_per_task"] == 8 * 4
    assert arms["anchors"]["real_executions_per_task"] == 8 * 4 * 2 / 4
    assert arms["wmrl"]["real_executions_per_task"] == arms["anchors"]["real_executions_per_task"]
    assert arms["wm"]["real_executions_per_task"] == 0
    assert all(g is None for g in arms["wm"]["gain_over"]["anchors"].values())  # n/a
    assert "| wm | n/a | n/a | n/a |" in result.markdown
    lines = results["reference_lines"]
    assert lines["oracle (exhaustive search, 72 executions)"]["mean"] == pytest.approx(1.0)
    for name in ("random search", "world-model search"):
        assert lines[f"{name}@2"]["mean"] <= lines[f"{name}@4"]["mean"] <= 1.0
    exact = [p for p in results["quality_curve"] if p["world_model"] == "mix:1"]
    assert {p["arm"] for p in exact} == {"wmrl", "ppi"}
    assert all(p["spearman_on_work"] == pytest.approx(1.0) for p in exact)
    for key in ("greedy@exec2", "best@exec4", "greedy@final"):
        mean, (low, high) = arms["ppi"]["readings"][key]
        assert low <= mean <= high
    best, greedy = (
        arms["real"]["readings"]["best@final"][0],
        arms["real"]["readings"]["greedy@final"][0],
    )
    assert best >= greedy - 1e-12
    lines_before = (tmp_path / "runs.jsonl").read_text()
    again = run_pertask_bench(config)
    assert (tmp_path / "runs.jsonl").read_text() == lines_before  # resumed, nothing rerun
    assert again.summary["ppi"]["readings"] == result.summary["ppi"]["readings"]
    assert (tmp_path / "pertask_curves.png").stat().st_size > 1000
    assert (tmp_path / "quality_curve.png").stat().st_size > 1000
    more = dataclasses.replace(config, seeds=3, learning_rates=(0.3, 1.0, 3.0))
    assert run_pertask_bench(more).rates  # more seeds and rates resume the same log
    config_text = (tmp_path / "config.json").read_text()
    lines_before = (tmp_path / "runs.jsonl").read_text()
    for changed, what in (({"rounds": 9}, "config.rounds"), ({"gate_scope": "cluster"},
                                                              "config.gate_scope")):  # fmt: skip
        with pytest.raises(ValueError, match=what):
            run_pertask_bench(dataclasses.replace(config, **changed))
    assert (tmp_path / "runs.jsonl").read_text() == lines_before  # nothing lost or mixed
    assert (tmp_path / "config.json").read_text() == config_text


def test_a_log_made_with_another_world_model_or_none_recorded_is_refused(tmp_path) -> None:
    """A runs.jsonl whose runs were made with another world-model artifact, or an older log
    that did not record what its runs were made with, is refused with the reason."""
    from wmrl_env.bench.pertask_bench import _RunLog, run_fingerprint
    from wmrl_env.bench.pertask_config import PerTaskConfig

    fingerprint = run_fingerprint(PerTaskConfig(suite="pool"))
    row = {"key": ["main", "wmrl", 0, 1.0, "default"],
           "run": RunRecord("wmrl", 0, [StepRecord(step=0)]).to_dict()}  # fmt: skip
    log = tmp_path / "runs.jsonl"
    log.write_text(json.dumps({**row, "made_with": fingerprint}) + "\n")
    assert len(_RunLog(log, fingerprint).runs) == 1
    other = {**fingerprint, "world_model": "0" * 64}
    with pytest.raises(ValueError, match="another world_model"):
        _RunLog(log, other)
    log.write_text(json.dumps(row) + "\n")
    with pytest.raises(ValueError, match="older log"):
        _RunLog(log, fingerprint)


def test_the_stamp_covers_every_file_the_world_model_loads(tmp_path, monkeypatch) -> None:
    """v3 (the first suite's) loads its status model beside its artifact: a log made with
    another status model is refused; v4 (the pool suite's) loads its artifact alone."""
    from wmrl_env.bench.pertask_bench import _RunLog, run_fingerprint
    from wmrl_env.bench.pertask_config import PerTaskConfig
    from wmrl_env.bench.run_log import StaleRunLog, file_digest
    from wmrl_env.world_models.programs import ml_default

    config = PerTaskConfig(suite="v1")
    made = run_fingerprint(config)
    assert made["world_model"] == file_digest(ml_default.ARTIFACTS["v3"])
    assert made["status_model"] == file_digest(ml_default.STATUS_ARTIFACTS["v3"])
    pool = run_fingerprint(PerTaskConfig(suite="pool"))
    assert set(pool) == {"config", "package", "world_model"}
    assert pool["world_model"] == file_digest(ml_default.OPEN_SPACE_ARTIFACTS["v4"])
    log = tmp_path / "runs.jsonl"
    run = RunRecord("wmrl", 0, [StepRecord(step=0)]).to_dict()
    row = {"key": ["main", "wmrl", 0, 1.0, "default"], "run": run, "made_with": made}
    log.write_text(json.dumps(row) + "\n")
    status = tmp_path / "ml_status_v3.npz"
    status.write_bytes(ml_default.STATUS_ARTIFACTS["v3"].read_bytes() + b"\0")
    monkeypatch.setitem(ml_default.STATUS_ARTIFACTS, "v3", status)
    with pytest.raises(StaleRunLog, match="another status_model"):
        _RunLog(log, run_fingerprint(config))


@pytest.mark.parametrize(
    ("draw", "screening", "arm"),
    [("balanced-ucb", "pps", "ppi"), ("ucb", "top", "wmrl"), ("random", "pps", "wmrl")],
)
def test_tiny_pertask_run_with_ucb_anchors_and_screening(draw, screening, arm) -> None:
    """A fused arm executes k of each anchor group's programs and anchors G / k times as
    many groups, so it spends the executions of a run without screening; anchors keep their
    plain draw."""
    from wmrl_env.bench.bank import TaskBank
    from wmrl_env.bench.pertask import run_arm
    from wmrl_env.bench.pertask_config import PerTaskConfig
    from wmrl_env.bench.suite import sample_tasks, split_tasks
    from wmrl_env.world_models import load_ml_world_model

    bank = TaskBank.of(sample_tasks(split_tasks("heldout"), 8))
    config = PerTaskConfig(
        arms=(arm, "anchors"), anchor_draw=draw, execute_per_group=2, screening=screening,
        rounds=6, group_size=4, anchor_fraction=0.25, budgets=(1, 2),
    )  # fmt: skip
    run = run_arm(bank, config, arm, 0, 1.0, load_ml_world_model("v2"))
    anchors = run_arm(bank, config, "anchors", 0, 1.0, None)
    # 2 anchor tasks of 8 without screening (8 programs); with it 4 tasks x 2 programs
    assert [s.n_anchor_groups for s in run.steps[1:]] == [4] * 6
    assert run.totals.real_executions == anchors.totals.real_executions == 6 * 8


def test_remembered_predictions_change_nothing_but_the_time() -> None:
    """With the default world model, a run that remembers predictions per (task, program)
    until the task is taught is the run that asks the model every round."""
    from wmrl_env.bench.bank import TaskBank, predicts_per_task
    from wmrl_env.bench.pertask import run_arm
    from wmrl_env.bench.pertask_config import PerTaskConfig
    from wmrl_env.bench.suite import sample_tasks, split_tasks
    from wmrl_env.bench.world_model import MixedWorldModel, RandomWorldModel
    from wmrl_env.world_models import load_ml_world_model

    bank = TaskBank.of(sample_tasks(split_tasks("heldout"), 3))
    config = PerTaskConfig(rounds=6, group_size=4, anchor_fraction=0.34)
    model = load_ml_world_model("v2")  # the cache serves v2's class (v3 caches its own rows)
    assert predicts_per_task(model, 3) and predicts_per_task(MixedWorldModel(model, {}, 0.5), 3)
    assert not predicts_per_task(RandomWorldModel(0), 3)
    runs = [
        run_arm(bank, config, "ppi", 0, 1.0, load_ml_world_model("v2"), cache=cache)
        for cache in (True, False)
    ]
    for cached, asked in zip(*(run.steps for run in runs), strict=True):
        assert cached.true_score == asked.true_score
        assert cached.spearman == pytest.approx(asked.spearman, nan_ok=True)
        assert cached.anchor_gap == pytest.approx(asked.anchor_gap, nan_ok=True)
    assert runs[0].task_scores == runs[1].task_scores


def test_the_anchor_design_comparison_pairs_runs_by_seed_and_task(tmp_path) -> None:
    """benchmarks/pertask_anchor_designs.py: on two constructed bench folders, each design's
    reading is the mean of its (seed x task) cells and Δ the mean of the paired differences
    (exactly, whatever the resampling: every bootstrap draw of a constant is that constant)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "pertask_anchor_designs.py"
    spec = importlib.util.spec_from_file_location("pertask_anchor_designs", path)
    designs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(designs)

    def folder(name: str, config: dict, best: list[list[float]]) -> Path:
        out = tmp_path / name
        out.mkdir()
        (out / "config.json").write_text(json.dumps({"group_size": 8, **config}))
        rows = []
        for seed, cells in enumerate(best):
            run = RunRecord("wmrl", seed, [StepRecord(step=0)])
            run.task_scores = {"best@exec8": cells}
            rows.append({"key": ["main", "wmrl", seed, 1.0, "default"], "run": run.to_dict()})
        rows.append({"key": ["tune", "wmrl", 1000, 1.0, "default"], "run": rows[0]["run"]})
        (out / "runs.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
        return out

    base = folder("a", {"anchor_draw": "balanced"}, [[0.5, 0.7], [0.6, 0.8]])
    other = folder(
        "b", {"anchor_draw": "balanced", "execute_per_group": 2, "screening": "top"},
        [[0.6, 0.8], [0.7, 0.9]],
    )  # fmt: skip
    assert len(designs.main_runs(base)["wmrl"]) == 2  # the tuning run is not reported
    text = designs.table([base, other], "best", [8, 16], resamples=50, against=None)
    assert "| wmrl | balanced | 0.650 [" in text
    assert "| wmrl | balanced, screening top 2/8 | 0.750 [" in text
    assert "Δ +0.100 [+0.100, +0.100]" in text and "not reached" in text
