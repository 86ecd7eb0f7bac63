"""``wmrl bench --domain robosuite`` end to end with real MuJoCo, CI-sized: every arm, files,
accounting. It checks the pipeline, not its learning (two rounds of two groups of two)."""

from __future__ import annotations

import argparse
import json
import math

import numpy as np
import pytest

from wmrl_env.bench.robotics.config import ROBOT_ARMS, RobotBenchConfig
from wmrl_env.bench.robotics.predictor_check import predictor_check
from wmrl_env.cli import bench as bench_cli

ITERATIONS, GROUPS, SIZE = 2, 2, 2
RECIPE = {"num_episodes": 2, "noise": 0.0, "perturb_prob": 0.0, "epochs": 5, "horizon": 64}


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    from wmrl_env.bench.robotics import run_robot_bench

    folder = tmp_path_factory.mktemp("robot-bench")
    config = RobotBenchConfig(
        arms=ROBOT_ARMS, seeds=1, iterations=ITERATIONS, num_groups=GROUPS, group_size=SIZE,
        anchor_fraction=0.5, branch_groups=1,
        eval_every=1, eval_starts=2, ensemble_size=2, hidden=16, recipe=RECIPE,
        cache_dir=str(folder / "cache"), out=str(folder / "out"),
    )  # fmt: skip
    return config, run_robot_bench(config)


@pytest.mark.robosuite
def test_every_output_is_written(bench):
    _, result = bench
    for name in (
        "config-seed0.json",
        "runs.jsonl",
        "seeds.jsonl",
        "results.json",
        "results.md",
        "success_vs_real_steps.png",
        "success_vs_sim_seconds.png",
    ):
        assert (result.folder / name).stat().st_size > 0, name
    results = json.loads((result.folder / "results.json").read_text())
    assert set(results["arms"]) == set(ROBOT_ARMS)
    assert "Behaviour-cloned start" in (result.folder / "results.md").read_text()
    seed_row = results["seeds"][0]
    assert 0.0 <= seed_row["start_success"] <= 1.0 and seed_row["start_eval_steps"] > 0


@pytest.mark.robosuite
def test_accounting_is_consistent(bench):
    _, result = bench
    runs = {run.arm: run for run in result.runs}
    chunk = 8  # the Lift recipe's chunk size
    per_round = {arm: [s.n_anchor_groups for s in run.steps[1:]] for arm, run in runs.items()}
    assert per_round["real"] == [GROUPS] * ITERATIONS  # the real arm executes every group
    fused = ("wmrl", "ppi", "wmrl-branch")
    assert per_round["anchors"] == [1] * ITERATIONS
    assert all(per_round[arm] == [1] * ITERATIONS for arm in fused)
    assert per_round["wm"] == [0] * ITERATIONS
    episodes = {arm: run.totals.real_executions for arm, run in runs.items()}
    assert episodes == {
        "real": 8, "anchors": 4, "wmrl": 4, "ppi": 4, "wm": 0, "dense": 8, "wmrl-dense": 8,
        "wmrl-branch": 4,
    }  # fmt: skip
    assert per_round["dense"] == per_round["wmrl-dense"] == [GROUPS] * ITERATIONS
    wm = runs["wm"].totals
    assert (wm.real_steps, wm.real_exec_seconds) == (0, 0.0)
    horizon_chunks = math.ceil(RECIPE["horizon"] / chunk)
    for arm, run in runs.items():
        totals = run.totals
        assert totals.real_steps % chunk == 0
        assert totals.real_steps <= totals.real_executions * horizon_chunks * chunk
        if arm != "wm":
            assert totals.real_steps >= totals.real_executions * chunk
            assert totals.real_exec_seconds > 0
        steps = [s.real_steps for s in run.steps]
        assert steps == sorted(steps)  # cumulative
        # evaluation is counted apart from training; a policy the evaluator has seen (the
        # start, when no round changed the weights: every group's outcomes alike) costs none
        if run.steps[-1].eval_steps == 0:
            assert all(s.true_score == run.steps[0].true_score for s in run.steps[1:])


@pytest.mark.robosuite
def test_metrics_are_finite(bench):
    _, result = bench
    start = result.runs[0].steps[0].true_score
    for run in result.runs:
        assert run.steps[0].true_score == start  # one base policy per seed, one start
        assert len(run.evaluated) == ITERATIONS + 1
        for step in run.steps[1:]:
            assert 0.0 <= step.true_score <= 1.0
            assert math.isfinite(step.fused_reward_mean), (run.arm, step)
    assert math.isfinite(result.summary.start)


@pytest.mark.robosuite
def test_the_predictor_is_checked_on_every_round_of_real_episodes(bench):
    _, result = bench

    def rows(name: str) -> list[dict]:
        return [json.loads(line) for line in (result.folder / name).read_text().splitlines()]

    checks = rows("predictor.jsonl")
    real_episodes = {"real": GROUPS * SIZE, "anchors": SIZE, "wmrl": SIZE, "ppi": SIZE,
                     "wmrl-branch": SIZE}  # fmt: skip
    dense = {"dense", "wmrl-dense"}  # every episode real, scored on its real states
    assert {(r["arm"], r["step"]) for r in checks} == {
        (arm, step) for arm in (*real_episodes, *dense) for step in range(1, ITERATIONS + 1)
    }  # the wm arm has no real episode to check against
    learnt = {}
    for row in sorted((r for r in checks if r["arm"] in dense), key=lambda r: r["step"]):
        assert row["shadow"] == "real-states" and row["pooled"] is None
        assert row["round"]["episodes"] == GROUPS * SIZE
        assert 0.0 <= row["round"]["mean_prediction"] <= 1.0
        assert 0.0 <= row["round"]["progress_coverage"] <= 1.0
        # co-evolution: every round's real episodes are added to the progress model
        seen = row["round"]["progress_episodes"]
        if row["arm"] in learnt:
            assert seen == learnt[row["arm"]] + GROUPS * SIZE
        learnt[row["arm"]] = seen
    assert set(learnt) == dense
    for row in [r for r in checks if r["arm"] not in dense]:
        assert row["round"]["episodes"] == real_episodes[row["arm"]]
        assert row["pooled"]["episodes"] == row["step"] * real_episodes[row["arm"]]
        assert 0.0 <= row["round"]["brier"] <= 1.0
        assert row["shadow"] == "closed"  # the bench's default
        # the round's episodes are recorded: its check can be recomputed from them
        episodes = row["round_episodes"]
        again = predictor_check(
            np.array(episodes["wm_score"]), np.array(episodes["success"]), episodes["group"]
        )
        assert again.to_dict() == pytest.approx(row["round"], nan_ok=True)
        assert set(episodes["group"]) <= set(range(GROUPS))
        # branched starts: the round's second group starts where a real episode went
        ages = episodes.get("start_age")
        if row["arm"] != "wmrl-branch" or row["step"] == 1:
            assert ages is None and "pooled_branched" not in row
        elif ages is not None:
            pairs = zip(ages, episodes["group"], strict=True)
            assert all((age >= 1) == (group == 1) for age, group in pairs)
            assert ("pooled_branched" in row) and ("pooled_fresh" in row)
    scores = {(r.arm, s.step): s.true_score for r in result.runs for s in r.steps}
    for row in rows("evaluations.jsonl"):  # per-start outcomes agree with the success rate
        assert len(row["outcomes"]) == 2
        assert sum(row["outcomes"]) / 2 == scores[(row["arm"], row["step"])]
    assert "policy's own real episodes" in (result.folder / "results.md").read_text()


@pytest.mark.robosuite
def test_a_bounded_env_pool_measures_exactly_what_one_env_per_member_did(bench, tmp_path):
    """The pool of ``workers`` envs parks and restores episodes: the same records as one env
    per real member (the cost before issue 26), only cheaper."""
    from wmrl_env.bench.robotics import run_robot_bench

    config, result = bench
    unbounded = RobotBenchConfig(
        **{**config.to_dict(), "arms": ("real",), "bounded_envs": False, "out": str(tmp_path)}
    )
    (old,) = run_robot_bench(unbounded).runs
    (new,) = [run for run in result.runs if run.arm == "real"]
    fields = ("true_score", "real_steps", "real_executions", "fused_reward_mean", "kappa")
    for before, after in zip(old.steps, new.steps, strict=True):
        assert [getattr(before, f) for f in fields] == pytest.approx(
            [getattr(after, f) for f in fields], nan_ok=True, rel=0, abs=0
        )


@pytest.mark.robosuite
def test_an_arm_on_envs_its_seed_shelved_measures_what_it_does_on_fresh_ones(bench, tmp_path):
    """The last arm of a seed plays on the task envs every arm before it played on (the
    seed's ``TaskEnvShelf``); alone in a bench, on envs built for it, it records the same."""
    from wmrl_env.bench.robotics import run_robot_bench

    config, result = bench
    last = config.arms[-1]
    alone = RobotBenchConfig(**{**config.to_dict(), "arms": (last,), "out": str(tmp_path)})
    (fresh,) = run_robot_bench(alone).runs
    (shelved,) = [run for run in result.runs if run.arm == last]
    fields = ("true_score", "real_steps", "real_executions", "fused_reward_mean", "kappa")
    for before, after in zip(fresh.steps, shelved.steps, strict=True):
        assert [getattr(before, f) for f in fields] == pytest.approx(
            [getattr(after, f) for f in fields], nan_ok=True, rel=0, abs=0
        )


@pytest.mark.robosuite
def test_the_task_env_shelf_builds_once_and_closes_failed_envs():
    from wmrl_env.bench.robotics.start import TaskEnvShelf

    shelf = TaskEnvShelf("Lift", horizon=16, chunk_size=8)
    first = shelf.lend()
    first.reset(seed=0)
    first.close()
    first.close()  # returned once
    again = shelf.lend()
    assert again.env is first.env and shelf.built == 1
    other = shelf.lend()  # the shelf is empty: a second env
    assert other.env is not first.env and shelf.built == 2
    with pytest.raises(ValueError):
        other.step(np.zeros(3, np.float32))  # a wrong action: this env is not lent again
    other.close()
    again.close()
    assert shelf.lend().env is first.env and shelf.built == 2
    assert shelf.lend().env is not other.env and shelf.built == 3
    shelf.close()


@pytest.mark.robosuite
def test_a_second_call_resumes_instead_of_rerunning(bench):
    from wmrl_env.bench.robotics import run_robot_bench

    config, result = bench
    lines = (result.folder / "runs.jsonl").read_text().count("\n")
    again = run_robot_bench(config)
    assert (result.folder / "runs.jsonl").read_text().count("\n") == lines == len(ROBOT_ARMS)
    assert again.summary.start == result.summary.start


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    bench_cli.register(parser.add_subparsers())
    return parser.parse_args(["bench", *argv])


def test_cli_builds_the_robot_config_and_keeps_the_ml_default():
    quick = bench_cli.robot_config_from_args(_args("--domain", "robosuite", "--seeds", "4"))
    assert quick == RobotBenchConfig.quick(seeds=4)
    random = bench_cli.robot_config_from_args(
        _args("--domain", "robosuite", "--full", "--world-model", "random")
    )
    assert random == RobotBenchConfig.full(world_model="random")
    assert bench_cli.config_from_args(_args()) == bench_cli.BenchConfig.quick()


@pytest.mark.parametrize(
    "argv, flag",
    [
        (("--domain", "robosuite", "--train-tasks", "3"), "--train-tasks"),
        (("--fusion-option", "gate_decay=0.9"), "--fusion-option"),
        (("--eval-starts", "3"), "--eval-starts"),
    ],
)
def test_cli_refuses_flags_of_the_other_domain(argv, flag):
    args = _args(*argv)
    build = (
        bench_cli.robot_config_from_args
        if args.domain == "robosuite"
        else bench_cli.config_from_args
    )
    with pytest.raises(ValueError, match=flag):
        build(args)


def test_report_only_summarises_the_runs_in_a_folder(tmp_path, capsys):
    from wmrl_env.bench.records import RunRecord, StepRecord

    def run(arm: str, seed: int, cost: int, scores: list[float]) -> dict:
        steps = [
            StepRecord(i, real_steps=cost * i, real_exec_seconds=cost * i / 100, true_score=s)
            for i, s in enumerate(scores)
        ]
        return RunRecord(arm, seed, steps).to_dict()

    rows = [
        run(arm, seed, cost, [0.4 + 0.1 * seed, 0.5 + 0.1 * seed + bump])
        for seed in (0, 1)
        for arm, cost, bump in (("real", 1000, 0.2), ("anchors", 250, 0.1))
    ]
    (tmp_path / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = _args("--domain", "robosuite", "--report-only", "--out", str(tmp_path))
    assert bench_cli.run(args) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["start_success"] == pytest.approx(0.45)
    assert results["improvement_over_start"]["real"]["mean"] == pytest.approx(0.3)
    assert results["arms"]["anchors"]["real_steps"] == 250
    assert (tmp_path / "success_vs_real_steps.png").stat().st_size > 0
    assert "| real | 0.750" in capsys.readouterr().out
    empty = tmp_path / "empty"
    empty.mkdir()
    args = _args("--domain", "robosuite", "--report-only", "--out", str(empty))
    assert bench_cli.run(args) == 2


def test_report_only_reads_predictor_rows_from_before_the_shadow_option(tmp_path):
    """Rows written before ``shadow`` and the within-group AUC existed are the open shadow's,
    with no within-group figure: the report still reads them."""
    from wmrl_env.bench.records import RunRecord, StepRecord
    from wmrl_env.bench.robotics import write_report

    run = RunRecord("real", 0, [StepRecord(0, true_score=0.4), StepRecord(1, true_score=0.5)])
    (tmp_path / "runs.jsonl").write_text(json.dumps(run.to_dict()) + "\n")
    check = {"episodes": 4, "successes": 2, "auc": 0.75, "brier": 0.2,
             "mean_prediction": 0.5, "success_rate": 0.5}  # fmt: skip
    old = {"arm": "real", "seed": 0, "step": 1, "round": check, "pooled": check}
    (tmp_path / "predictor.jsonl").write_text(json.dumps(old) + "\n")
    write_report(tmp_path)
    (row,) = json.loads((tmp_path / "results.json").read_text())["predictor"]
    assert (row["shadow"], row["auc"]) == ("open", 0.75)
    assert math.isnan(row["within_group_auc"])
    assert "| real | open | 1 |" in (tmp_path / "results.md").read_text()


def test_the_report_adds_the_reference_lines_of_the_same_starts(tmp_path):
    """``references.json`` (benchmarks/robot_references.py) puts the oracle, the untrained
    policy and plain search's pass@k beside the arms in results.md."""
    from wmrl_env.bench.records import RunRecord, StepRecord
    from wmrl_env.bench.robotics import write_report
    from wmrl_env.bench.robotics.report import pass_at

    run = RunRecord("real", 0, [StepRecord(0, true_score=0.4), StepRecord(1, true_score=0.5)])
    (tmp_path / "runs.jsonl").write_text(json.dumps(run.to_dict()) + "\n")
    tries = [[[True, False, False, False], [False, True, False, False]],  # seed 0: 2 tries
             [[False, False, False, False], [True, True, False, True]]]  # seed 1  # fmt: skip
    search = [
        {"seed": seed, "greedy": greedy, "pass_at": pass_at(outcome), "tries": outcome,
         "steps": 8 * 60, "episodes": 8}
        for seed, (greedy, outcome) in enumerate(zip((0.25, 0.5), tries, strict=True))
    ]  # fmt: skip
    assert [row["pass_at"] for row in search] == [[0.25, 0.5], [0.0, 0.75]]
    references = {"task": "Lift", "eval_starts": 4, "horizon": 60, "tries": 2,
                  "oracle": {"success": 1.0, "outcomes": [True] * 4}, "search": search}  # fmt: skip
    (tmp_path / "references.json").write_text(json.dumps(references))
    write_report(tmp_path)
    text = (tmp_path / "results.md").read_text()
    assert "| scripted expert, noise-free (oracle) | 1.000 | 1 |" in text
    assert "| behaviour-cloned start, greedy (untrained) | 0.375 [" in text
    assert "best of 1 (pass@1) | 0.125 [" in text and "best of 2 (pass@2) | 0.625 [" in text
    assert "60 real steps on average" in text


def test_sampled_tries_from_the_same_start_draw_the_noise_they_are_given():
    """``success_on_seeds(noise_seeds=...)``: other noise from the same starts gives other
    episodes, the same noise the same ones; the policy's own generator is left as it was."""
    import gymnasium as gym
    import torch

    from wmrl_env.robotics import success_on_seeds

    class Noisy:  # pushes right with a random chunk: success depends on the noise
        instruction = ""

        def __init__(self) -> None:
            self.generator = torch.Generator().manual_seed(0)

        def __call__(self, observations, instructions):
            return np.zeros((len(observations), 50, 1), np.float32)

        def act(self, observations):
            noise = torch.randn((len(observations), 50, 1), generator=self.generator)
            return ((0.6 + 1.5 * noise).clamp(-1, 1).numpy(),)

    env = gym.make("MountainCarContinuous-v0", max_episode_steps=400)
    policy = Noisy()
    before = policy.generator.get_state()
    starts = list(range(12))

    def tried(j: int) -> np.ndarray:
        return success_on_seeds(policy, env, starts, sampled=True,
                                noise_seeds=[s + 97 * j for s in starts])  # fmt: skip

    tries = [tried(j) for j in range(3)]
    again = tried(1)
    assert np.array_equal(again, tries[1])
    assert np.array_equal(tries[0], success_on_seeds(policy, env, starts, sampled=True))
    assert len({t.tobytes() for t in tries}) > 1  # the tries differ
    assert torch.equal(policy.generator.get_state(), before)
    with pytest.raises(ValueError, match="2 noise seeds for 12 episodes"):
        success_on_seeds(policy, env, starts, sampled=True, noise_seeds=[0, 1])
    env.close()


def test_the_shadow_is_an_option_with_a_clear_error():
    assert RobotBenchConfig.quick().shadow == "closed"
    open_args = ("--domain", "robosuite", "--shadow", "open", "--arms", "real", "anchors", "wmrl")
    config = bench_cli.robot_config_from_args(_args(*open_args))
    assert config.shadow == "open"
    with pytest.raises(ValueError, match="ppi arm needs the closed shadow"):
        RobotBenchConfig.quick(shadow="open")
    with pytest.raises(ValueError, match="shadow must be one of"):
        RobotBenchConfig.quick(shadow="teacher")
    with pytest.raises(ValueError, match="--shadow"):
        bench_cli.config_from_args(_args("--shadow", "open"))


def test_fusion_options_refuse_what_the_bench_sets_itself():
    config = RobotBenchConfig.quick(fusion_options={"wm_gate": "off", "gate_decay": 0.9})
    assert config.fusion_options == {"wm_gate": "off", "gate_decay": 0.9}
    with pytest.raises(ValueError, match="anchor_fraction"):
        RobotBenchConfig.quick(fusion_options={"anchor_fraction": 0.5})


def test_cli_sets_fusion_options_and_uncertainty_anchors():
    config = bench_cli.robot_config_from_args(
        _args("--domain", "robosuite", "--fusion-option", "gate_decay=0.9",
              "--fusion-option", "wm_gate=off", "--uncertainty-anchors")
    )  # fmt: skip
    assert config.fusion_options == {"gate_decay": 0.9, "wm_gate": "off"}
    assert config.uncertainty_anchors
    assert bench_cli.robot_config_from_args(_args("--domain", "robosuite")).fusion_options == {}


@pytest.mark.parametrize(
    "option, message",
    [
        ("gate_window=4", "unknown RewardFusion argument"),  # gone since issue 23
        ("gate_decay=1.5", "decay must be in"),  # a value the fusion refuses
        ("seed=3", "the bench sets them"),
        ("gate_decay", "KEY=VALUE"),
    ],
)
def test_cli_refuses_bad_fusion_options_with_a_clear_error(option, message, capsys):
    args = _args("--domain", "robosuite", "--fusion-option", option)
    with pytest.raises(ValueError, match=message):
        bench_cli.robot_config_from_args(args)
    assert bench_cli.run(args) == 2  # before anything runs
    assert message in capsys.readouterr().err


@pytest.fixture(scope="module")
def spied(bench, tmp_path_factory):
    """One fused arm through the real bench, with fusion options, uncertainty anchors and
    interim evaluations on one start; every vector env it builds is kept with its infos."""
    from wmrl_env import wrappers
    from wmrl_env.bench.robotics import run_robot_bench

    made = []

    class Spy(wrappers.WorldModelVectorEnv):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.final_infos = []
            made.append(self)

        def step(self, actions):
            out = super().step(actions)
            if out[4]["batch"]["round_done"][0]:
                self.final_infos.append(out[4])
            return out

    config, _ = bench
    options = {"gate_decay": 0.9, "gate_alpha": 0.1}
    spy_config = RobotBenchConfig(
        **{**config.to_dict(), "arms": ("ppi",), "fusion_options": options,
           "uncertainty_anchors": True, "interim_eval_starts": 1,
           "out": str(tmp_path_factory.mktemp("spied"))}
    )  # fmt: skip
    patch = pytest.MonkeyPatch()
    patch.setattr(wrappers, "WorldModelVectorEnv", Spy)
    try:
        result = run_robot_bench(spy_config)
    finally:
        patch.undo()
    return spy_config, result, made


@pytest.mark.robosuite
def test_fusion_options_reach_the_fusion_the_bench_uses(spied):
    config, _, made = spied
    (envs,) = made
    assert envs.fusion.gate.decay == 0.9 and envs.fusion.gate.alpha == 0.1
    assert (envs.fusion.method, envs.fusion.anchor_fraction) == ("ppi", config.anchor_fraction)


@pytest.mark.robosuite
def test_uncertainty_anchors_reach_the_bench_fusion(spied):
    """The fused arm draws by imagined uncertainty, and the fusion rectifies with that pi
    (PPI weighs an anchor by 1 / pi, so pi must be the draw's, not the uniform m / M)."""
    _, _, made = spied
    (envs,) = made
    assert envs.anchor_priority == "uncertainty" and callable(envs.imagination_policy)
    assert len(envs.final_infos) == ITERATIONS
    uniform = 1 / GROUPS  # one anchor group of two
    for info in envs.final_infos:
        pi = info["inclusion_probability"][info["is_anchor"]]
        assert pi.size == SIZE and np.all((pi > 0) & (pi <= 1))
        assert not np.allclose(pi, uniform)  # the ensemble's groups differ in uncertainty


@pytest.mark.robosuite
def test_the_bench_shadows_its_episodes_closed_with_the_policy(spied):
    """The closed shadow is the bench's default: the mean-chunk policy plays each real
    episode's shadow, and every real episode has a valid world-model score."""
    _, _, made = spied
    (envs,) = made
    assert envs.shadow == "closed" and callable(envs.imagination_policy)
    for info in envs.final_infos:
        real = np.isfinite(info["real_score"])
        assert np.isfinite(info["wm_score"][real]).all()


@pytest.mark.robosuite
def test_interim_evaluations_use_the_first_starts_and_the_last_all(spied):
    config, result, _ = spied
    rows = [
        json.loads(line) for line in (result.folder / "evaluations.jsonl").read_text().splitlines()
    ]
    assert [(r["step"], len(r["outcomes"])) for r in rows] == [(1, 1), (2, config.eval_starts)]


@pytest.mark.robosuite
def test_the_evaluator_reuses_what_it_has_played_exactly(bench):
    """Evaluating a policy again costs no step; asking for more starts plays only the new
    ones; the outcomes are those of a fresh evaluator."""
    from wmrl_env.bench.robotics.evaluation import Evaluator
    from wmrl_env.bench.robotics.start import base_policy

    config, _ = bench
    policy = base_policy(config, 0)[0]
    seeds = [10**6, 10**6 + 1, 10**6 + 2]
    fresh = Evaluator(config.task, RECIPE["horizon"], seeds)
    fresh.success(policy)
    cached = Evaluator(config.task, RECIPE["horizon"], seeds)
    cached.success(policy, starts=1)
    one = cached.steps
    cached.success(policy, starts=1)
    assert cached.steps == one  # the same weights: nothing played
    cached.success(policy)
    assert cached.outcomes == fresh.outcomes and cached.steps == fresh.steps
    with torch_no_grad():
        next(iter(policy.parameters())).add_(0.01)  # changed weights: played again
    cached.success(policy, starts=1)
    assert cached.steps > fresh.steps
    fresh.close()
    cached.close()


def torch_no_grad():
    import torch

    return torch.no_grad()


def test_interim_eval_starts_must_be_a_share_of_the_starts():
    assert RobotBenchConfig.quick(interim_eval_starts=3).interim_eval_starts == 3
    for bad in (0, 9):  # quick() evaluates on 8 starts
        with pytest.raises(ValueError, match="interim_eval_starts"):
            RobotBenchConfig.quick(interim_eval_starts=bad)
    config = bench_cli.robot_config_from_args(
        _args("--domain", "robosuite", "--interim-eval-starts", "4")
    )
    assert config.interim_eval_starts == 4
