"""MLTaskMultiTurnEnv and ScriptedReviser: gymnasium's checker, turn reports, reward modes,
the private score's place, the reviser's fixes, and a live multi-turn episode in the sandbox."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import wmrl_env.envs.ml_tasks  # noqa: F401  (registers the environments)
from wmrl_env.envs.ml_tasks import (
    HELDOUT_TASKS,
    STOP,
    MLTaskMultiTurnEnv,
    ProgramSpec,
    ScriptedReviser,
    load_table,
)
from wmrl_env.envs.ml_tasks.reviser import play_episode
from wmrl_env.envs.ml_tasks.turns import TurnReport, parse_report, render_report
from wmrl_env.executors.base import ExecResult
from wmrl_env.sandboxes.replay import ReplayExecutor

NAN_CRASH = ProgramSpec("none", "linear", "mid")  # no imputation: crashes on missing values


def _task_with_missing_values() -> str:
    table = load_table()
    return next(
        task
        for task in HELDOUT_TASKS
        if table.lookup(task, NAN_CRASH.id).status == "crashed"
        and "missing values" in table.lookup(task, NAN_CRASH.id).message
    )


def _run(env: MLTaskMultiTurnEnv, actions) -> list[tuple]:
    steps = []
    for action in actions:
        steps.append(env.step(action))
        if steps[-1][2]:
            break
    return steps


def test_registered_ids_and_gymnasium_checker() -> None:
    env = gym.make("wmrl/MLTaskMultiTurnReplay-v0", tasks="heldout", max_turns=3)
    check_env(env.unwrapped, skip_render_check=True)  # random text: crashed reports, reward 0
    env.close()
    live = gym.make("wmrl/MLTaskMultiTurn-v0")
    assert live.spec.nondeterministic and isinstance(live.unwrapped, MLTaskMultiTurnEnv)
    live.close()


def test_each_turn_observes_the_previous_runs_report() -> None:
    task = _task_with_missing_values()
    env = MLTaskMultiTurnEnv(tasks=[task], executor="replay", max_turns=3)
    env.reset(seed=0)
    observation, reward, terminated, truncated, info = env.step(NAN_CRASH)
    report = parse_report(observation)
    assert report is not None and report.turn == 1 and report.max_turns == 3
    # the replayed message names no exception class ("unknown"); its text says what failed
    assert report.status == "crashed" and report.error_class is None
    assert "missing values" in report.traceback_tail and report.score is None
    assert info["status"] == "crashed" and info["score"] is None and not terminated
    assert (reward, truncated) == (0.0, False)
    observation, *_, info = env.step(ProgramSpec("standardize", "linear", "mid"))
    report = parse_report(observation)
    row = load_table().lookup(task, "standardize-linear-mid")
    assert report.status == "ok" and report.error_class is None
    assert report.score == pytest.approx(row.score, abs=5e-5)  # rendered to 4 decimals
    assert info["score"] == pytest.approx(row.score) and info["turn"] == 2


@pytest.mark.parametrize("mode", ["final", "best", "improvement"])
def test_reward_modes(mode) -> None:
    table = load_table()
    task = "wine"
    specs = [
        ProgramSpec("standardize", "forest", "mid"),
        ProgramSpec("none", "tree", "low"),
        ProgramSpec("standardize", "linear", "low"),
    ]
    scores = [table.lookup(task, s.id).score for s in specs]
    env = MLTaskMultiTurnEnv(tasks=[task], executor="replay", max_turns=3, reward=mode)
    env.reset(seed=0)
    steps = _run(env, specs)
    rewards = [step[1] for step in steps]
    assert [step[2] for step in steps] == [False, False, True]
    if mode == "final":
        assert rewards == [0.0, 0.0, pytest.approx(scores[-1])]
    elif mode == "best":
        assert rewards == [0.0, 0.0, pytest.approx(max(scores))]
    else:
        best = np.maximum.accumulate(scores)
        assert rewards == pytest.approx(np.diff(np.concatenate([[0.0], best])).tolist())
        assert sum(rewards) == pytest.approx(max(scores))
    info = steps[-1][4]
    assert info["turns"] == 3 and info["final_score"] == pytest.approx(scores[-1])
    assert info["best_score"] == pytest.approx(max(scores)) and not info["stopped"]


def test_stop_ends_the_episode_without_running_anything() -> None:
    env = MLTaskMultiTurnEnv(tasks=["wine"], executor="replay", max_turns=4, reward="final")
    env.reset(seed=0)
    env.step(ProgramSpec("standardize", "forest", "mid"))
    observation, reward, terminated, _, info = env.step(STOP)
    assert terminated and info["stopped"] and info["turns"] == 1
    assert reward == pytest.approx(info["final_score"]) and parse_report(observation) is None
    with pytest.raises(RuntimeError, match="episode is over"):
        env.step(STOP)
    env.reset(seed=1)
    *_, info = env.step(STOP)  # stopping at once: nothing ran, the failure reward
    assert info["turns"] == 0 and info["final_score"] == 0.0


class _PrivateScoreExecutor:
    """A replay whose results also carry a private-test score (what a task with a private
    test reports): the env must show it in the final info only."""

    def __init__(self) -> None:
        self.inner: ReplayExecutor = load_table().replay_executor()

    def run(self, jobs):
        return [
            ExecResult(**{**r.__dict__, "metadata": {**r.metadata, "private_score": 0.123}})
            for r in self.inner.run(jobs)
        ]

    def close(self) -> None:
        self.inner.close()


def test_private_score_appears_only_in_the_final_info() -> None:
    for mode in ("final", "best", "improvement"):
        env = MLTaskMultiTurnEnv(
            tasks=["wine"], executor=_PrivateScoreExecutor(), max_turns=2, reward=mode
        )
        observation, info = env.reset(seed=0)
        assert "private_score" not in info and "0.123" not in observation
        steps = _run(env, [ProgramSpec("standardize", "forest", "mid")] * 2)
        for observation, reward, terminated, _, info in steps:
            assert "0.123" not in observation and reward != 0.123
            assert ("private_score" in info) == terminated
        assert steps[-1][4]["private_score"] == 0.123


def test_bad_arguments_get_clear_errors() -> None:
    with pytest.raises(ValueError, match="max_turns"):
        MLTaskMultiTurnEnv(tasks=["wine"], executor="replay", max_turns=0)
    with pytest.raises(ValueError, match="reward"):
        MLTaskMultiTurnEnv(tasks=["wine"], executor="replay", reward="last")
    env = MLTaskMultiTurnEnv(tasks=["wine"], executor="replay")
    with pytest.raises(RuntimeError, match="reset"):
        env.step(STOP)


def test_report_round_trips_through_its_text() -> None:
    reports = [
        TurnReport("wine", 2, 4, "crashed", "KeyError", "line 1\nKeyError: 'y'", None, 1.25, 0.5),
        TurnReport("iris", 1, 1, "ok", None, "", 0.8125, 3.5, 0.8125),
        TurnReport("a_b", 3, 5, "timeout", "Timeout", "time limit exceeded", None, 20.0, None),
    ]
    for report in reports:
        assert parse_report(render_report(report)) == report
    assert parse_report("Task wine: ...") is None


def test_reviser_fixes_missing_values_then_explores_and_ends_on_its_best() -> None:
    task = _task_with_missing_values()
    env = MLTaskMultiTurnEnv(tasks=[task], executor="replay", max_turns=5, reward="final")
    reviser = ScriptedReviser(start=NAN_CRASH, seed=0)
    observation, _ = env.reset(seed=0)
    reviser.reset()
    submitted, terminated = [], False
    while not terminated:
        action = reviser.act(observation)
        submitted.append(action)
        observation, reward, terminated, _, info = env.step(action)
    assert submitted[0] == NAN_CRASH
    assert submitted[1] == ProgramSpec("standardize", "linear", "mid")  # the matching fix
    assert len(set(submitted[:-1])) == len(submitted) - 1  # never repeats while exploring
    assert reward == pytest.approx(info["best_score"]) and info["best_score"] > 0


def test_reviser_improves_on_its_first_turn_on_heldout_tasks() -> None:
    """Over every held-out task x 5 start seeds (replay, K = 4, reward = final submission):
    the final score minus the first turn's, with a bootstrap interval over tasks."""
    gains = np.zeros((len(HELDOUT_TASKS), 5))
    for i, task in enumerate(HELDOUT_TASKS):
        env = MLTaskMultiTurnEnv(tasks=[task], executor="replay", max_turns=4, reward="final")
        for seed in range(5):
            steps = play_episode(env, ScriptedReviser(seed=seed), seed=seed)
            first = steps[0][4]["score"]
            gains[i, seed] = steps[-1][1] - (0.0 if first is None else first)
        env.close()
    rng = np.random.default_rng(0)
    per_task = gains.mean(axis=1)
    boot = [per_task[rng.integers(len(per_task), size=len(per_task))].mean() for _ in range(2000)]
    low = float(np.quantile(boot, 0.025))
    # the final submission is the best so far (as read to 4 decimals): never below turn 1
    assert (gains >= -1e-4).all()
    high = float(np.quantile(boot, 0.975))
    print(f"reviser gain over turn 1: {per_task.mean():.3f} [{low:.3f}, {high:.3f}]")
    assert low > 0, f"gain {per_task.mean():.3f}, 95 % lower bound {low:.3f}"


@pytest.mark.slow
def test_live_episode_in_the_sandbox(tmp_path) -> None:
    """Real executions: a crash with its traceback, then the reviser's fix runs."""
    task = _task_with_missing_values()
    env = MLTaskMultiTurnEnv(tasks=[task], executor="local", max_turns=2, data_root=str(tmp_path))
    reviser = ScriptedReviser(start=NAN_CRASH, seed=0)
    observation, _ = env.reset(seed=0)
    observation, _, _, _, info = env.step(reviser.act(observation))
    report = parse_report(observation)
    assert report.status == "crashed" and report.error_class == "ValueError"
    assert "Traceback" in report.traceback_tail or "ValueError" in report.traceback_tail
    observation, reward, terminated, _, info = env.step(reviser.act(observation))
    assert terminated and info["status"] == "ok" and math.isfinite(reward) and reward > 0
    env.close()


@pytest.mark.slow
def test_live_episode_on_a_task_with_a_private_test(tmp_path) -> None:
    """A generated task with a private test runs in the multi-turn env: its private score
    comes only in the final info, computed from the final program's predictions (never the
    validation score, never in a reward or an observation)."""
    env = MLTaskMultiTurnEnv(
        tasks=["hr_missing_s0"], executor="local", max_turns=2, data_root=str(tmp_path)
    )
    reviser = ScriptedReviser(start=NAN_CRASH, seed=0)
    observation, info = env.reset(seed=0)
    assert observation.startswith("Task hr_missing_s0:")
    observation, reward, terminated, _, info = env.step(reviser.act(observation))
    assert not terminated and "private_score" not in info
    assert parse_report(observation).status == "crashed"
    observation, reward, terminated, _, info = env.step(reviser.act(observation))
    assert terminated and info["status"] == "ok" and reward == info["best_score"] > 0
    private = info["private_score"]
    assert isinstance(private, float) and math.isfinite(private) and 0 < private <= 1
    assert private != reward and f"{private:.4f}" not in observation
    env.close()
