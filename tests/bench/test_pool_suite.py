"""``wmrl bench --suite pool``: the pool table replayed with rewards on validation scores,
every reading and reference line on private-test scores."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from wmrl_env.bench.bank import TaskBank
from wmrl_env.bench.pertask_config import PerTaskConfig
from wmrl_env.bench.pool_suite import (
    default_pool_tables,
    default_pretraining_table,
    pool_bank,
    pool_lines,
    pretraining_constant,
)
from wmrl_env.bench.search import random_search


def _toy_bank() -> TaskBank:
    """Validation and private scores that disagree: the best by validation is never the
    best on the private test."""
    scores = np.array([[1.0, 0.8, 0.1], [0.3, 0.9, 0.5]])
    private = np.array([[0.4, 1.0, 0.0], [0.0, 0.2, 1.0]])
    return TaskBank(
        ("a", "b"), ("", ""), (("p", "q", "r"),) * 2, scores, np.ones((2, 3)),
        choices=tuple({"model": m} for m in "xyz"), private=private,
    )  # fmt: skip


def test_the_committed_pool_reads_as_the_pool_report_does() -> None:
    """Six generated and eight real-data tasks x 152 programs; rewards are validation
    scores, readings private ones, normalised so the pool's best private program scores 1;
    exhaustive validation search and the best constant match the pool report's figures."""
    from wmrl_env.envs.ml_tasks.pool import read_pool
    from wmrl_env.envs.ml_tasks.pool_report import summarise

    bank = pool_bank()
    assert bank.scores.shape == bank.private.shape == (14, 152)
    assert bank.private.max(axis=1) == pytest.approx(np.ones(14))
    assert not np.array_equal(bank.scores, bank.private)
    assert len(bank.choices) == 152 and {"imputer", "model"} <= set(bank.choices[0])
    rows = [row for path in default_pool_tables() for row in read_pool(path)]
    report = summarise(rows, draws=10)
    lines = pool_lines(bank, (16,), seeds=10)
    search = lines["exhaustive validation search over the pool (152 executions)"]
    constant = lines["best constant program, chosen on the other tasks' validation scores"]
    for t, task_id in enumerate(bank.task_ids):
        assert search[t] == pytest.approx(report[task_id]["validation_search"])
        assert constant[t] == pytest.approx(report[task_id]["best_constant"])
    with pytest.raises(ValueError, match="not in the pool tables"):
        pool_bank(task_ids=("hr_missing_s9",))


def test_the_best_constant_is_chosen_on_the_pretraining_tasks_only() -> None:
    """The bench's constant program is the shared program with the best mean validation
    score over the pretraining table; no held-out score moves the pick, and the line reads
    that one program's private score on every task."""
    from dataclasses import replace

    from wmrl_env.envs.ml_tasks.grammar import GrammarProgram
    from wmrl_env.envs.ml_tasks.pool import read_pool
    from wmrl_env.envs.ml_tasks.pool_report import normalised_scores

    bank = pool_bank()
    pick = pretraining_constant(bank)
    by_task, programs, valid, _ = normalised_scores(read_pool(default_pretraining_table()))
    mean = dict(zip(programs, np.mean([valid[t] for t in by_task], axis=0), strict=True))
    shared = {p: mean[p] for p in programs if GrammarProgram.from_id(p).choices in bank.choices}
    best = max(shared, key=shared.get)
    assert 0 < len(shared) < bank.num_programs
    assert bank.choices[pick] == GrammarProgram.from_id(best).choices
    shuffled = replace(bank, scores=np.random.default_rng(0).permuted(bank.scores, axis=1))
    assert pretraining_constant(shuffled) == pick
    lines = pool_lines(bank, (16,), seeds=10, constant=pick)
    line = lines["best constant program, chosen on the pretraining tasks' validation scores"]
    assert line == pytest.approx(bank.private[:, pick])


def test_random_search_deploys_its_best_by_validation_program() -> None:
    """At the pool's size random search is exhaustive validation search; at one program
    its expectation is the mean private score (2000 draws: a standard error at most
    0.5 / sqrt(2000) = 0.011 on a score in [0, 1]; the tolerance 0.05 is 4.5 of them)."""
    bank = _toy_bank()
    out = random_search(bank.scores, (1, 3), seeds=2000, seed=0, deploy=bank.private)
    assert out[3] == pytest.approx([0.4, 0.2])  # by validation: programs 0 and 1, not 1 and 2
    assert out[1] == pytest.approx(bank.private.mean(axis=1), abs=0.05)
    plain = random_search(bank.scores, (1, 3), seeds=2000, seed=0)
    assert plain[3] == pytest.approx([1.0, 0.9])  # without deploy: the best reward itself


def test_the_arms_read_the_private_score_of_their_best_by_validation_program() -> None:
    """``real`` executes every program (a group far larger than the pool): its best
    executed reading is each task's private score of the best program by validation, and
    its greedy reading is a private score too."""
    from wmrl_env.bench.pertask import run_arm

    bank = _toy_bank()
    for policy in ("tabular", "factorized"):
        config = PerTaskConfig(rounds=1, group_size=200, last_k=1, budgets=(200,),
                               policy=policy, suite="pool", arms=("real",))  # fmt: skip
        run = run_arm(bank, config, "real", 0, 1.0, None)
        assert run.task_scores["best@final"] == [0.4, 0.2]
        assert run.steps[0].true_score == pytest.approx(bank.private.mean())
        greedy = run.task_scores["greedy@final"]
        assert all(g in set(row) for g, row in zip(greedy, bank.private.tolist(), strict=True))


def test_the_pool_suite_is_the_default_with_world_model_v4_and_a_factorized_policy() -> None:
    from wmrl_env.cli.bench import _world_model_text, pertask_config_from_args, register

    assert PerTaskConfig(suite="pool", arms=("real", "wmrl")).arms == ("real", "wmrl")
    assert PerTaskConfig(suite="pool", arms=("real",), world_model="random")
    with pytest.raises(ValueError, match="suite must be one of"):
        PerTaskConfig(suite="v3")
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    quick = pertask_config_from_args(parser.parse_args(["bench", "--suite", "pool"]))
    assert quick.arms == ("real", "anchors", "wm", "wmrl", "ppi") and quick.policy == "factorized"
    assert _world_model_text(quick) == "v4"
    assert quick.rounds == 60 and PerTaskConfig.quick(suite="v1").rounds == 40
    full = pertask_config_from_args(parser.parse_args(["bench", "--suite", "pool", "--full"]))
    assert full.rounds == 120 and PerTaskConfig.full(suite="v1").rounds == 80
    assert "debias" in full.arms and full.quality_weights == (0.5, 0.75, 0.9, 1.0)
    default = pertask_config_from_args(parser.parse_args(["bench"]))
    assert (default.suite, default.policy) == ("pool", "factorized") and "wmrl" in default.arms
    assert _world_model_text(default) == "v4"
    first = pertask_config_from_args(parser.parse_args(["bench", "--suite", "v1"]))
    assert (first.suite, first.policy, _world_model_text(first)) == ("v1", "tabular", "v3")
    tabular = parser.parse_args(["bench", "--policy", "tabular"])
    assert pertask_config_from_args(tabular).policy == "tabular"
    args = parser.parse_args(["bench", "--suite", "pool", "--arms", "real", "ppi"])
    assert pertask_config_from_args(args).arms == ("real", "ppi")
    args = parser.parse_args(["bench", "--policy", "factorized"])
    assert pertask_config_from_args(args).policy == "factorized"


def test_pool_bench_builds_world_model_v4() -> None:
    from wmrl_env.bench.bank import predicts_per_task
    from wmrl_env.bench.pertask_bench import world_model_factory
    from wmrl_env.world_models.programs.open_space import OpenSpaceWorldModel

    bank = pool_bank(task_ids=("hr_missing_s0",))
    model = world_model_factory("default", bank, "v4")(0)
    assert isinstance(model, OpenSpaceWorldModel) and predicts_per_task(model, 6)
    mixed = world_model_factory("mix:1", bank, "v4")(0)
    np.testing.assert_allclose(bank.predict_all(mixed).scores, bank.scores[0])


def test_tiny_pool_bench_writes_private_readings(tmp_path) -> None:
    """The whole bench on three pool tasks with the factorized policy, world-model arms
    included: the report reads private scores, holds the pool's and the world model's
    lines, and resumes."""
    from wmrl_env.bench.pertask_bench import run_pertask_bench

    config = PerTaskConfig.quick(
        suite="pool", policy="factorized", heldout_tasks=3, seeds=2, rounds=6, group_size=4,
        anchor_fraction=0.34, learning_rates=(1.0,), budgets=(2, 4), bootstrap=100,
        out=str(tmp_path),
    )  # fmt: skip
    result = run_pertask_bench(config)
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["suite"] == "pool" and results["policy"] == "factorized"
    arms = ("real", "anchors", "wm", "wmrl", "ppi")
    assert len(results["tasks"]) == 3
    assert set(results["arms"]) == {*arms, *(f"{a}@common" for a in arms)}
    lines = results["reference_lines"]
    assert {"world model's zero-shot pick", "world-model search@2", "world-model search@4"} <= set(
        lines
    )
    wm_runs = results["arms"]["wm"]
    assert wm_runs["real_executions_per_task"] == 0
    assert lines["pool's best program (the pool's, not the space's)"]["mean"] == 1.0
    assert lines["random search@2"]["mean"] <= lines["random search@4"]["mean"] + 0.02
    assert results["arms"]["real"]["real_executions_per_task"] == 6 * 4
    assert "every score on the private test" in result.markdown
    assert "Quality curve" in result.markdown
    ceiling = results["noise_ceiling"]
    assert list(ceiling) == results["tasks"] and all(-1 <= v <= 1 for v in ceiling.values())
    first = results["tasks"][0]
    per_task = results["per_task_lines"]  # the tiny run's budgets stop short of 16
    constant = next(n for n in per_task if n.startswith("best constant program"))
    assert set(per_task) == {
        constant,
        "world model's zero-shot pick",
        "exhaustive validation search over the pool (152 executions)",
    }
    for name, values in per_task.items():  # per task, the values the line's mean averages
        assert list(values) == results["tasks"]
        assert np.mean(list(values.values())) == pytest.approx(lines[name]["mean"])
    row = f"| {first} | {ceiling[first]:.3f} | {per_task[constant][first]:.3f} |"
    assert row in result.markdown
    before = (tmp_path / "runs.jsonl").read_text()
    run_pertask_bench(config)
    assert (tmp_path / "runs.jsonl").read_text() == before
    assert (tmp_path / "pertask_curves.png").stat().st_size > 1000


def test_world_model_search_deploys_the_private_score_of_its_best_by_validation() -> None:
    """A world model that knows the rewards executes the best by validation first; the
    line reads that program's private score, not the best private score executed."""
    from wmrl_env.bench.search import world_model_search
    from wmrl_env.bench.world_model import MixedWorldModel, RandomWorldModel

    toy = _toy_bank()
    bank = TaskBank(("a", "b"), ("task a", "task b"), toy.texts, toy.scores, toy.seconds,
                    choices=toy.choices, private=toy.private)  # fmt: skip

    def knows(seed: int) -> MixedWorldModel:
        return MixedWorldModel(RandomWorldModel(seed), bank.truth(), 1.0)

    found = world_model_search(bank, knows, (1, 3), seeds=1, deploy=bank.private)
    assert found[1].tolist() == [0.4, 0.2] and found[3].tolist() == [0.4, 0.2]
    plain = world_model_search(bank, knows, (1, 3), seeds=1)
    assert plain[3].tolist() == [1.0, 0.9]
