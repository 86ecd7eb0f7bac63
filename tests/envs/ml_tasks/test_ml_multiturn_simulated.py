"""Simulated turns: TurnSimulator renders what a real run would report in the real env's format,
WorldModelVectorEnv answers non-anchor groups turn by turn from it and runs anchor groups as
whole real episodes, and the simulated reports' fidelity per turn on held-out tasks."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from wmrl_env import RewardFusion, WorldModelVectorEnv
from wmrl_env.envs.ml_tasks import (
    HELDOUT_TASKS,
    STOP,
    MLTaskMultiTurnEnv,
    ProgramSpec,
    ScriptedReviser,
    get_task,
    load_table,
)
from wmrl_env.envs.ml_tasks.simulator import TurnSimulator
from wmrl_env.envs.ml_tasks.turns import parse_report
from wmrl_env.world_models import load_default_ml_world_model

MAX_TURNS = 3


@pytest.fixture(scope="module")
def world_model():
    return load_default_ml_world_model()


def _obs_array(texts):
    array = np.empty(len(texts), dtype=object)
    array[:] = list(texts)
    return array


def test_simulated_reports_have_the_real_format(world_model) -> None:
    simulator = TurnSimulator(world_model, max_turns=MAX_TURNS, reward="best", seed=0)
    tasks = HELDOUT_TASKS[:6]
    starts = _obs_array([get_task(t).description for t in tasks])
    actions = _obs_array([ProgramSpec("log1p", "svm", "mid")] * len(tasks))
    step = simulator.predict_step(starts, actions)
    for task, text in zip(tasks, step.next_observations, strict=True):
        report = parse_report(text)
        assert report is not None and report.task_id == task and report.turn == 1
        assert (report.score is None) == (report.status != "ok")
        assert report.status == "ok" or report.traceback_tail
    assert not step.terminations.any() and (step.rewards == 0).all()  # "best": paid at the end
    stop = simulator.predict_step(step.next_observations, _obs_array([STOP] * len(tasks)))
    best = [parse_report(t).best_score or 0.0 for t in step.next_observations]
    assert stop.terminations.all() and stop.rewards == pytest.approx(best)


def test_second_suite_tasks_are_simulated_from_their_own_description() -> None:
    """A generated and a real-data task (private test) are read like the real env reads them:
    the world model sees each task's own description and the program of its task kind."""
    from wmrl_env.envs.ml_tasks.env import resolve_task
    from wmrl_env.world_models.outcomes import OutcomePrediction

    seen = []

    class Recorder:
        def predict_outcomes(self, contexts, programs, failure_score=0.0):
            seen.extend(zip(contexts, programs, strict=True))
            n = len(programs)
            probs = np.tile([1.0, 0, 0, 0, 0], (n, 1))
            return OutcomePrediction.build(probs, np.full(n, 0.6), np.zeros(n),
                                           np.zeros(n, bool), failure_score)  # fmt: skip

    tasks = ("hr_missing_s0", "rd_dplyr_storms")
    simulator = TurnSimulator(Recorder(), max_turns=2, status="most_likely", seed=0)
    starts = _obs_array([f"Task {t}: (the description)" for t in tasks])
    step = simulator.predict_step(starts, _obs_array([ProgramSpec("none", "knn", "mid")] * 2))
    assert [parse_report(text).task_id for text in step.next_observations] == list(tasks)
    assert [parse_report(text).score for text in step.next_observations] == [0.6, 0.6]
    for task, (context, program) in zip(tasks, seen, strict=True):
        assert context == resolve_task(task).description and "KNeighbors" in program


def test_a_world_model_without_the_contract_is_refused() -> None:
    class ScoresOnly:
        def predict(self, contexts, artifacts):
            return np.zeros(len(artifacts))

    with pytest.raises(TypeError, match="predict_outcomes"):
        TurnSimulator(ScoresOnly(), max_turns=2)


def _reviser_actions(revisers, observations, done):
    return [STOP if d else r.act(o) for r, o, d in zip(revisers, observations, done, strict=True)]


def test_vector_env_answers_non_anchors_from_the_model_and_runs_anchor_episodes(
    world_model,
) -> None:
    table = load_table()
    make_env = functools.partial(
        MLTaskMultiTurnEnv, tasks="heldout", executor="replay", max_turns=MAX_TURNS
    )
    simulator = TurnSimulator(world_model, max_turns=MAX_TURNS, reward="best", seed=0)
    envs = WorldModelVectorEnv(
        make_env,
        simulator,
        num_groups=8,
        group_size=4,
        fusion=RewardFusion(method="wmrl", anchor_fraction=0.25, seed=0),
        executor="inline",
        max_episode_steps=MAX_TURNS,
    )
    observations, info = envs.reset(seed=3)
    anchors = info["is_anchor"]
    assert anchors.any() and not anchors.all()
    assert all((anchors[g * 4] == anchors[g * 4 : g * 4 + 4]).all() for g in range(8))
    revisers = [ScriptedReviser(seed=i) for i in range(32)]
    done = np.zeros(32, dtype=bool)
    history: list[list[str]] = [[] for _ in range(32)]
    while not done.all():
        actions = _reviser_actions(revisers, observations, done)
        observations, rewards, terminated, truncated, info = envs.step(actions)
        for i in np.flatnonzero(~done):
            history[i].append((actions[i], observations[i]))
        done = terminated | truncated
    assert info["batch"]["round_done"].all()
    for i in range(32):
        real_member = anchors[i]
        for action, text in history[i]:
            report = parse_report(text)
            if report is None:  # a stop
                assert action == STOP
                continue
            if real_member:  # the real env's report: the table's status and score
                row = table.lookup(report.task_id, action.id)
                assert report.status == row.status
                if row.status == "ok":
                    assert report.score == pytest.approx(row.score, abs=5e-5)
    assert np.isfinite(info["advantage"]).all() and np.isfinite(rewards).all()
    envs.close()


def test_simulated_status_matches_the_real_turn_on_heldout_tasks(world_model) -> None:
    """Fidelity per turn: play the scripted reviser's real episodes on every held-out task (a
    random start and two starts that fail where data have missing values or negative
    features), then ask the simulator, from each real observation, for the report of the
    program the reviser sent: the most likely status against the real one."""
    turns = []  # (observation before, action, real report)
    starts = (None, ProgramSpec("log1p", "svm", "mid"), ProgramSpec("none", "linear", "mid"))
    for task in HELDOUT_TASKS:
        env = MLTaskMultiTurnEnv(tasks=[task], executor="replay", max_turns=4)
        for seed, start in enumerate(starts):
            reviser = ScriptedReviser(start=start, seed=seed)
            observation, _ = env.reset(seed=seed)
            terminated = False
            while not terminated:
                action = reviser.act(observation)
                if action == STOP:
                    break
                before = observation
                observation, _, terminated, _, _ = env.step(action)
                turns.append((before, action, parse_report(observation)))
        env.close()
    simulator = TurnSimulator(world_model, max_turns=4, status="most_likely", seed=0)
    predicted = simulator.predict_step(
        _obs_array([t[0] for t in turns]), _obs_array([t[1] for t in turns])
    )
    simulated = [parse_report(text) for text in predicted.next_observations]
    hits = np.array([s.status == t[2].status for s, t in zip(simulated, turns, strict=True)])
    turn_of = np.array([t[2].turn for t in turns])
    failed = np.array([t[2].status != "ok" for t in turns])
    caught = np.array([s.status != "ok" for s in simulated])[failed]
    accuracy = {turn: round(float(hits[turn_of == turn].mean()), 3) for turn in range(1, 5)}
    print(
        f"simulated status accuracy per turn {accuracy} over {np.bincount(turn_of)[1:]} turns, "
        f"overall {hits.mean():.3f} (all-ok baseline {1 - failed.mean():.3f}); "
        f"real failures reported as failures {caught.mean():.3f} of {failed.sum()}"
    )
    assert all(value >= 0.90 for value in accuracy.values()), accuracy
    assert failed.sum() >= 20 and caught.mean() >= 0.80
