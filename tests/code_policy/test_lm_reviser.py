"""The code LM as a multi-turn reviser: revision pairs mined from real runs, a tiny GPT-2 cloned
on them (built from a config), grid-constrained decoding whose probabilities the policy
gradient uses, the GRPO step's direction, and the LM transfer check at tiny sizes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from wmrl_env.code_policy.revision import revision_pairs, revision_prompt, task_of_observation
from wmrl_env.envs.ml_tasks import (
    STOP,
    TRAIN_TASKS,
    ProgramSpec,
    get_task,
    load_table,
    render_program,
    task_ids,
)
from wmrl_env.envs.ml_tasks.reviser import fix_for_error, neighbours
from wmrl_env.envs.ml_tasks.turns import TurnReport, parse_report
from wmrl_env.executors.base import BaseExecutor
from wmrl_env.utils.hashing import artifact_hash

pytestmark = [pytest.mark.transformers, pytest.mark.torch]

NAN_CRASH = ProgramSpec("none", "linear", "mid")  # crashes on a task with missing values
TINY = {"tasks_per_split": 2, "epochs": 1, "hidden_size": 32, "num_layers": 1,
        "first_per_task": 2, "ok_per_task": 2}  # fmt: skip


def _spec_of(program: str) -> ProgramSpec:
    label = program.splitlines()[0].split()[1].rstrip(":")  # "Solution none-linear-mid:"
    return ProgramSpec(*label.split("-"))


@pytest.fixture(scope="module")
def reviser_path(tmp_path_factory):
    from wmrl_env.code_policy.lm_reviser import make_lm_reviser

    return make_lm_reviser(0, tmp_path_factory.mktemp("lm_reviser"), **TINY)


@pytest.fixture
def reviser(reviser_path):
    from wmrl_env.code_policy.lm_reviser import LMReviser

    return LMReviser.load(reviser_path, seed=0, learning_rate=1e-2)


def test_revision_pairs_are_mined_from_real_runs() -> None:
    table = load_table()
    task = next(
        t for t in TRAIN_TASKS
        if table.lookup(t, NAN_CRASH.id).status == "crashed"
        and "missing values" in table.lookup(t, NAN_CRASH.id).message
    )  # fmt: skip
    kind = get_task(task).kind
    pairs = revision_pairs([task], max_turns=3, seed=0, first_per_task=3)
    first = [target for prompt, target in pairs if prompt == revision_prompt(task, None, None)]
    assert len(first) == 3
    revisions = [(p, t) for p, t in pairs if p != revision_prompt(task, None, None)]
    crash = render_program(NAN_CRASH, kind)
    (fix_prompt, fix_target) = next((p, t) for p, t in revisions if crash in p)
    report = parse_report(fix_prompt.split("Report:\n")[1].removesuffix("\nRevised program:\n"))
    assert report.status == "crashed" and "missing values" in report.traceback_tail
    fixed = fix_for_error(NAN_CRASH, report)
    assert fix_target == render_program(fixed, kind)
    assert table.lookup(task, fixed.id).status == "ok"
    for prompt, target in revisions:
        last = _spec_of(prompt.split("Last program:\n")[1])
        row = table.lookup(task, last.id)
        if row.status != "ok":
            assert table.lookup(task, _spec_of(target).id).status == "ok"
            continue
        better = [n for n in neighbours(last) if table.lookup(task, n.id).status == "ok"
                  and table.lookup(task, n.id).score > row.score]  # fmt: skip
        if target == STOP:
            assert not better
        else:
            assert better and _spec_of(target) in neighbours(last)
            assert table.lookup(task, _spec_of(target).id).status == "ok"


def test_prompts_carry_the_task_the_last_program_and_its_report() -> None:
    report_text = "Task wine, turn 1 of 3\nstatus: ok\nvalidation score: 0.9000\nseconds: 0.10\n"
    prompt = revision_prompt("wine", "print(1)\n", report_text)
    assert prompt.startswith("Task wine:") and "Last program:\nprint(1)\nReport:\n" in prompt
    assert prompt.endswith("Revised program:\n")
    assert task_of_observation(report_text) == "wine"
    assert task_of_observation(get_task("wine").description) == "wine"
    with pytest.raises(ValueError, match="not a task description"):
        task_of_observation("hello")


def test_constrained_probabilities_sum_to_one_over_the_grid(reviser) -> None:
    """The log-probabilities the gradient uses are a distribution over the 72 grid programs
    and STOP: their probabilities sum to 1."""
    from wmrl_env.code_policy.lm_reviser import Turn

    task = task_ids("heldout")[0]
    trie = reviser._trie(task)
    prompt_ids = reviser.tokenizer(revision_prompt(task, None, None),
                                   add_special_tokens=False)["input_ids"]  # fmt: skip
    texts = [render_program(s, get_task(task).kind) for s in _grid()] + [STOP]
    ids = reviser.tokenizer(texts, add_special_tokens=False)["input_ids"]
    turns = []
    for text, row in zip(texts, ids, strict=True):
        completion = [*row, reviser.tokenizer.eos_token_id]
        allowed = [trie.allowed(completion[:k]) for k in range(len(completion))]
        turns.append(Turn(prompt_ids, completion, text, allowed))
    with np.errstate(all="ignore"):
        total = float(np.exp(reviser.log_probs(turns).detach().numpy()).sum())
    assert total == pytest.approx(1.0, abs=1e-4)


def test_sampling_follows_those_probabilities(reviser) -> None:
    """The most likely first program is drawn as often as its probability says (tolerance:
    4 binomial standard errors of 300 draws)."""
    task = task_ids("heldout")[0]
    description = get_task(task).description
    n = 300
    actions, turns = reviser.act([description] * n, [None] * n)
    probabilities = np.exp(reviser.log_probs(turns[:40]).detach().numpy())
    top = int(np.argmax(probabilities))
    p = float(probabilities[top])
    frequency = sum(a == actions[top] for a in actions) / n
    assert abs(frequency - p) < 4 * math.sqrt(p * (1 - p) / n), (frequency, p)


def test_every_program_written_is_one_the_table_holds(reviser) -> None:
    table_hashes = {(row.task_id, row.program_hash) for row in load_table().rows}
    tasks = list(task_ids("heldout"))[:6]
    observations = [get_task(t).description for t in tasks]
    actions, _ = reviser.act(observations, [None] * len(tasks))
    report = TurnReport(tasks[0], 1, 3, "crashed", "ValueError", "Input X contains NaN.",
                        None, 0.5, None)  # fmt: skip
    from wmrl_env.envs.ml_tasks.turns import render_report

    revised, _ = reviser.act([render_report(report)], [actions[0]])
    for task, action in [*zip(tasks, actions, strict=True), (tasks[0], revised[0])]:
        assert action == STOP or (task, artifact_hash(action)) in table_hashes


def test_a_positive_advantage_makes_a_program_likelier_and_a_negative_one_rarer(
    reviser_path,
) -> None:
    from wmrl_env.code_policy.lm_reviser import LMReviser

    task = task_ids("heldout")[1]
    for sign in (1.0, -1.0):
        reviser = LMReviser.load(reviser_path, seed=3, learning_rate=1e-2)
        _, turns = reviser.act([get_task(task).description], [None])
        before = float(reviser.log_probs(turns)[0].detach())
        reviser.update(turns, [sign])
        after = float(reviser.log_probs(turns)[0].detach())
        assert (after - before) * sign > 0, (sign, before, after)
    with pytest.raises(ValueError, match="advantages"):
        reviser.update(turns, [1.0, 2.0])


def test_behaviour_rates_count_stops_repeats_and_runs_after_failures() -> None:
    from wmrl_env.bench.multiturn_lm import behaviour

    def report(status: str, score: float | None) -> TurnReport:
        return TurnReport("t", 1, 3, status, None, "", score, 0.1, score)

    reports = [
        [report("crashed", None), report("ok", 0.5), report("ok", 0.7)],
        [report("crashed", None), report("crashed", None)],
    ]
    programs = [["a", "b", "b"], ["c", "d"]]
    figures = behaviour(reports, programs, stopped=[False, True])
    assert figures["best"] == pytest.approx(0.35) and figures["first"] == 0.0
    assert figures["stop_rate"] == 0.5
    assert figures["repeat_rate"] == pytest.approx(1 / 3)  # b after b; of 3 revisions
    assert figures["fix_rate"] == pytest.approx(1 / 2)  # after 2 failures, 1 ran
    assert figures["failures_per_episode"] == 1.5


@pytest.mark.slow
def test_lm_transfer_pays_each_arm_its_real_executions(reviser_path) -> None:
    from wmrl_env.bench.multiturn_lm import LMTransferConfig, lm_markdown, run_lm_transfer
    from wmrl_env.world_models import load_default_ml_world_model

    config = LMTransferConfig(seeds=2, rounds=1, num_groups=2, group_size=2, anchor_fraction=0.5,
                              heldout_tasks=2, eval_episodes=1, eval_every=1)  # fmt: skip
    executor = load_table().replay_executor()  # grid-only programs: the table holds them all
    out = run_lm_transfer(config, load_default_ml_world_model(), reviser_path, executor)
    per_round = {"real": 4, "anchors": 2, "wmrl": 2, "wm": 0}
    assert {(r["arm"], r["seed"]) for r in out["runs"]} == {
        (a, s) for a in per_round for s in range(2)
    }
    for run in out["runs"]:
        final = run["checkpoints"][-1]
        episodes = per_round[run["arm"]]
        assert episodes <= final["real_executions"] <= episodes * config.max_turns
        assert 0.0 <= final["real_best"] <= 1.0 and 0.0 <= final["sim_best"] <= 1.0
        assert final["sim_minus_real"] == pytest.approx(final["sim_best"] - final["real_best"])
    text = lm_markdown(out)
    assert "| wm |" in text and "gain over anchors" in text and "runs after a failure" in text


@pytest.mark.slow
def test_lm_transfer_runs_on_the_second_suite(reviser_path, monkeypatch) -> None:
    """Tiny sizes on two pretraining tasks and two held-out ones (one real-data), real turns
    replayed from the pool tables: every program the LM writes is there, and each arm's real
    episodes report the private score on which the gain over anchors is read."""
    from wmrl_env.bench import multiturn, multiturn_lm
    from wmrl_env.code_policy import ReplayOrLiveExecutor
    from wmrl_env.envs.ml_tasks.pool import pool_replay_executor
    from wmrl_env.world_models.programs.ml_default import load_ml_world_model

    train, heldout = ["hr_missing_s1", "hr_periodic_s2"], ["hr_missing_s0", "rd_ecdat_catsup"]
    for module in (multiturn, multiturn_lm):
        monkeypatch.setattr(module, "suite_tasks", lambda config: (train, heldout))
    replay = ReplayOrLiveExecutor(pool_replay_executor(tasks=train + heldout), _NoLiveRun())
    config = multiturn_lm.LMTransferConfig(
        seeds=2, rounds=1, num_groups=2, group_size=2, anchor_fraction=0.5, heldout_tasks=0,
        eval_episodes=1, eval_every=1, suite="pool",
    )  # fmt: skip
    out = multiturn_lm.run_lm_transfer(config, load_ml_world_model("v4"), reviser_path, replay)
    assert "real_private" in out["untrained"]
    rows = {row["arm"]: row for row in multiturn_lm.lm_summary_rows(out)}
    assert set(rows) == {"real", "anchors", "wmrl", "wm"}
    for run in out["runs"]:
        final = run["checkpoints"][-1]
        assert 0.0 <= final["real_private"] <= 1.0 and final["live_executions"] == 0
    private = {(r["arm"], r["seed"]): r["checkpoints"][-1]["real_private"] for r in out["runs"]}
    gain = np.mean([private["wm", s] - private["anchors", s] for s in range(2)])
    assert rows["wm"]["gain_over_anchors"][0] == pytest.approx(gain)
    assert rows["wm"]["real_executions"][0] == 0
    text = multiturn_lm.lm_markdown(out)
    assert "gain over anchors (paired, private)" in text and "real private score" in text


class _NoLiveRun(BaseExecutor):
    """Fails a test that sends a job the replay does not hold."""

    def _submit(self, jobs):
        if jobs:
            raise AssertionError(f"{len(jobs)} jobs the pool tables do not hold")
        return []

    def _close(self):
        pass


def _grid() -> list[ProgramSpec]:
    from wmrl_env.envs.ml_tasks.programs import all_programs

    return all_programs()
