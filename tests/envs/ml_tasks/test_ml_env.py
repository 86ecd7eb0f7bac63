"""MLTaskEnv: gymnasium's checker, both action kinds, seeding, failures, replay and live."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import wmrl_env.envs.ml_tasks  # noqa: F401  (registers the environments)
from wmrl_env.envs.ml_tasks import HELDOUT_TASKS, TRAIN_TASKS, MLTaskEnv, ProgramSpec, load_table
from wmrl_env.executors import ExecStatus
from wmrl_env.sandboxes.replay import ReplayExecutor


@pytest.fixture
def replay_env():
    env = MLTaskEnv(tasks="all", executor="replay", action_mode="structured")
    yield env
    env.close()


def test_check_env_passes_with_replay_including_step_determinism(replay_env) -> None:
    check_env(replay_env, skip_render_check=True)


def test_check_env_passes_for_text_actions() -> None:
    env = MLTaskEnv(tasks=["iris"], executor=load_table().replay_executor())
    check_env(env, skip_render_check=True)  # random text programs: error results, reward 0
    env.close()


def test_registered_ids_make_working_envs() -> None:
    env = gym.make("wmrl/MLTaskReplay-v0", tasks="heldout")
    check_env(env.unwrapped)
    description, info = env.reset(seed=3)
    assert info["task_id"] in HELDOUT_TASKS and description.startswith("Task ")
    _, reward, terminated, truncated, info = env.step(np.array([1, 3, 1]))
    assert terminated and not truncated and 0.0 <= reward <= 1.0
    env.close()
    live = gym.make("wmrl/MLTask-v0")
    assert live.spec.nondeterministic and isinstance(live.action_space, gym.spaces.Text)
    live.close()


def test_reset_is_seeded_and_task_can_be_chosen(replay_env) -> None:
    first = [replay_env.reset(seed=s)[1]["task_id"] for s in range(10)]
    again = [replay_env.reset(seed=s)[1]["task_id"] for s in range(10)]
    assert first == again and len(set(first)) > 3
    _, info = replay_env.reset(seed=0, options={"task_id": "engel"})
    assert info == {"task_id": "engel", "kind": "regression", "metric": "rmse"}
    with pytest.raises(ValueError, match="not one of this env's tasks"):
        MLTaskEnv(tasks="train", executor="replay").reset(options={"task_id": "engel"})


def test_reward_and_info_match_the_table(replay_env) -> None:
    table = load_table()
    row = table.lookup("digits", "standardize-svm-mid")
    replay_env.reset(options={"task_id": "digits"})
    _, reward, _, _, info = replay_env.step(ProgramSpec.from_id("standardize-svm-mid"))
    assert reward == row.score and info["score"] == row.score
    assert info["raw_metric"] == row.raw_metric and info["exec_seconds"] == row.exec_seconds
    assert info["status"] == "ok" and info["program_id"] == "standardize-svm-mid"
    assert info["program_hash"] == row.program_hash


def test_all_structured_action_forms_give_the_same_result(replay_env) -> None:
    outcomes = set()
    for action in (
        [3, 4, 2],
        {"preprocessing": "poly2", "model": 4, "capacity": "high"},
        ProgramSpec("poly2", "boosting", "high"),
    ):
        replay_env.reset(options={"task_id": "wine"})
        outcomes.add(replay_env.step(action)[1])
    assert len(outcomes) == 1


def test_text_action_runs_the_text(replay_env) -> None:
    table = load_table()
    row = table.lookup("iris", "none-forest-mid")
    replay_env.reset(options={"task_id": "iris"})
    _, reward, _, _, info = replay_env.step(row.program())  # the same program as text
    assert reward == row.score and info["program_id"] is None


def test_a_failed_execution_gets_the_failure_reward() -> None:
    failed = next(row for row in load_table().rows if row.status != "ok")
    env = MLTaskEnv(tasks=[failed.task_id], executor="replay", failure_reward=-0.5)
    env.reset()
    _, reward, terminated, _, info = env.step(failed.spec)
    assert reward == -0.5 and terminated
    assert info["status"] == failed.status and info["score"] is None
    assert info["raw_metric"] is None and info["message"]
    env.reset()
    _, reward, _, _, info = env.step("print('not in the table')")
    assert reward == -0.5 and info["status"] == "error"
    assert "not in the replay table" in info["message"]
    env.close()


def test_one_step_per_episode_and_misuse_errors(replay_env) -> None:
    with pytest.raises(RuntimeError, match="reset"):
        replay_env.step([0, 0, 0])
    replay_env.reset(seed=0)
    replay_env.step([0, 0, 0])
    with pytest.raises(RuntimeError, match="one step per episode"):
        replay_env.step([0, 0, 0])
    with pytest.raises(ValueError, match="action_mode"):
        MLTaskEnv(action_mode="both")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="executor must be"):
        MLTaskEnv(executor="docker")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Executor"):
        MLTaskEnv(executor=object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown task"):
        MLTaskEnv(tasks=["titanic"])
    with pytest.raises(ValueError, match="at least one task"):
        MLTaskEnv(tasks=[])


def test_render_ansi_shows_program_and_result() -> None:
    env = MLTaskEnv(tasks=["iris"], executor="replay", render_mode="ansi")
    assert "reset" in env.render()
    env.reset()
    env.step([1, 0, 1])
    text = env.render()
    assert "--- program ---" in text and "LogisticRegression" in text and "'status': 'ok'" in text
    env.close()


def test_make_job_is_what_step_runs(replay_env) -> None:
    replay_env.reset(options={"task_id": "iris"})
    job = replay_env.make_job([1, 0, 1])
    assert job.tags["task_id"] == "iris" and job.tags["program_id"] == "standardize-linear-mid"
    other = replay_env.make_job([1, 0, 1], task_id="diabetes")
    assert other.tags["task_id"] == "diabetes" and "Ridge(alpha=1.0)" in other.program
    result = ReplayExecutor.run(load_table().replay_executor(), [job])[0]
    assert result.status is ExecStatus.OK


@pytest.mark.slow
def test_live_execution_in_the_sandbox_reproduces_the_table() -> None:
    """The default executor runs the program for real and scores it on the host."""
    env = MLTaskEnv(tasks=TRAIN_TASKS)
    row = load_table().lookup("iris", "standardize-linear-mid")
    env.reset(seed=0, options={"task_id": "iris"})
    _, reward, terminated, truncated, info = env.step(row.spec)
    assert info["status"] == "ok", info["message"] + info["stderr_tail"]
    assert reward == pytest.approx(row.score)
    assert info["raw_metric"] == pytest.approx(row.raw_metric)
    assert info["exec_seconds"] > 0 and terminated and not truncated
    env.reset(options={"task_id": "iris"})
    _, reward, _, _, info = env.step("open('predictions.csv', 'w').write('id,prediction\\n0,1\\n')")
    assert info["status"] == "invalid_output" and reward == 0.0
    assert "expected 45" in info["message"]
    env.close()


@pytest.mark.slow
def test_check_env_passes_live() -> None:
    env = gym.make("wmrl/MLTask-v0", tasks=["iris"])
    check_env(env.unwrapped, skip_render_check=True)  # random text: crashed, reward 0
    env.close()


def test_info_never_holds_nan(replay_env) -> None:
    for row in load_table().for_task("fertility")[:12]:
        replay_env.reset(options={"task_id": "fertility"})
        info = replay_env.step(row.spec)[4]
        assert not any(isinstance(v, float) and math.isnan(v) for v in info.values())
