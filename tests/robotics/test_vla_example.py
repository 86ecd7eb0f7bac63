"""The VLA drop-in: action chunks, the chunk policy, and the GRPO example run end to end."""

from __future__ import annotations

import importlib.util
import shlex
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

pytestmark = pytest.mark.torch

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "vla_libero_grpo.py"


def load_example():
    spec = importlib.util.spec_from_file_location("vla_libero_grpo", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_action_chunking_stops_at_the_end_of_an_episode() -> None:
    from wmrl_env.integrations.vla import ActionChunking

    env = ActionChunking(gym.make("MountainCarContinuous-v0", max_episode_steps=5), chunk_size=4)
    env.reset(seed=0)
    first = env.step(np.zeros((4, 1), np.float32))
    second = env.step(np.zeros((4, 1), np.float32))
    assert first[4]["chunk_steps"] == 4 and second[4]["chunk_steps"] == 1 and second[3]
    with pytest.raises(ValueError, match="chunk has shape"):
        env.step(np.zeros((3, 1), np.float32))
    with pytest.raises(ValueError, match="chunk_size"):
        ActionChunking(gym.make("MountainCarContinuous-v0"), chunk_size=0)
    with pytest.raises(TypeError, match="Box"):
        ActionChunking(gym.make("CartPole-v1"), chunk_size=2)


def test_chunk_policy_log_probs_match_its_samples_and_it_is_a_vla_policy() -> None:
    import torch

    from wmrl_env.integrations.vla import ChunkedGaussianPolicy, StateMLPBackbone, VLAPolicy

    backbone = StateMLPBackbone.build(observation_dim=5, chunk_size=3, action_dim=2, seed=0)
    policy = ChunkedGaussianPolicy(backbone, "pick up the cube", log_std_init=-0.5, seed=0)
    assert isinstance(policy, VLAPolicy)
    observations = np.random.default_rng(0).normal(size=(4, 5)).astype(np.float32)
    actions, log_probs = policy.act(observations)
    assert actions.shape == (4, 3, 2) and log_probs.shape == (4,)
    torch.testing.assert_close(policy.log_prob(observations, actions), log_probs)
    chunks = policy(observations, ["pick up the cube"] * 4)
    assert chunks.shape == (4, 3, 2) and np.abs(chunks).max() <= 1.0
    spread = actions - chunks
    assert 0.3 < spread.std() < 1.0, "exploration noise should have std exp(-0.5) ~ 0.61"


@pytest.mark.robosuite
@pytest.mark.slow
def test_example_runs_end_to_end_on_robosuite() -> None:
    example = load_example()
    history = example.main(
        shlex.split(
            "--env lift --iterations 2 --num-groups 2 --group-size 2 --chunk-size 4 "
            "--episode-chunks 2 --warmup-episodes 1 --anchor-fraction 0.5 --eval-every 2 "
            "--eval-episodes 1"
        )
    )
    assert [row["iteration"] for row in history] == [0, 1]
    assert all(row["n_anchor_trajectories"] == 2 for row in history)
    assert all(np.isfinite(row["loss"]) for row in history)
    assert "eval_success" in history[1]
    # every round refits the world model on its anchors' real transitions
    assert 0 < history[0]["model_transitions"] < history[1]["model_transitions"]


@pytest.mark.libero
@pytest.mark.slow
def test_example_runs_end_to_end_on_libero_long(tmp_path) -> None:
    example = load_example()
    out = tmp_path / "log.csv"
    history = example.main(
        f"--iterations 2 --num-groups 2 --group-size 2 --episode-chunks 2 --chunk-size 4 "
        f"--warmup-episodes 1 --anchor-fraction 0.5 --real-envs 2 --out {out}".split()
    )
    assert len(history) == 2 and all(row["n_anchor_trajectories"] == 2 for row in history)
    assert 0 < history[0]["model_transitions"] < history[1]["model_transitions"]
    assert out.read_text().splitlines()[0].startswith("anchor_success")
