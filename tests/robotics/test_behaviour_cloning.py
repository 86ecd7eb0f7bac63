"""Behaviour cloning of action chunks into a GRPO-ready ChunkedGaussianPolicy."""

from __future__ import annotations

import numpy as np
import pytest

from wmrl_env.robotics.behaviour_cloning import (
    action_chunks,
    fit_chunk_predictor,
    load_policy,
    save_policy,
    train_bc_policy,
)
from wmrl_env.robotics.demonstrations import Demonstrations

pytestmark = pytest.mark.torch


def _synthetic(seed: int = 0, episodes: int = 6, length: int = 15) -> Demonstrations:
    """Episodes whose action is a fixed smooth function of the state (a learnable expert)."""
    rng = np.random.default_rng(seed)
    weights = rng.normal(size=(5, 3))
    data = []
    for _ in range(episodes):
        states = rng.normal(size=(length, 5))
        actions = np.tanh(states @ weights) * 0.9
        data.append(
            [
                (s, a, 0.0, s, i == length - 1)
                for i, (s, a) in enumerate(zip(states, actions, strict=True))
            ]
        )
    return Demonstrations.from_episodes("toy", data, list(range(episodes)))


def test_training_reduces_the_loss_and_is_deterministic() -> None:
    demos = _synthetic()
    settings = {"chunk_size": 1, "hidden": 32, "epochs": 60, "batch_size": 32, "seed": 1}
    backbone, losses = fit_chunk_predictor(demos, **settings)
    assert losses[-1] < 0.3 * losses[0], losses
    again, same = fit_chunk_predictor(demos, **settings)
    assert same == losses
    batch = demos.observations[:5]
    np.testing.assert_array_equal(
        backbone(batch, []).detach().numpy(), again(batch, []).detach().numpy()
    )


def test_policy_chunks_have_the_right_shape_and_range(tmp_path) -> None:
    demos = _synthetic()
    policy = train_bc_policy(
        demos, chunk_size=4, instruction="toy", log_std_init=-2.0, epochs=5, hidden=16
    )
    chunks = policy(demos.observations[:7], ["toy"] * 7)
    assert chunks.shape == (7, 4, 3) and chunks.dtype == np.float32
    assert np.abs(chunks).max() <= 1.0
    actions, log_probs = policy.act(demos.observations[:7])
    assert actions.shape == (7, 4, 3) and tuple(log_probs.shape) == (7,)
    np.testing.assert_allclose(policy.log_std.detach().numpy(), -2.0)

    loaded = load_policy(save_policy(policy, tmp_path / "policy.pt"))
    np.testing.assert_array_equal(loaded(demos.observations[:7], ["toy"] * 7), chunks)
    assert loaded.instruction == "toy"
    np.testing.assert_array_equal(loaded.log_std.detach().numpy(), policy.log_std.detach().numpy())


def test_chunks_stop_at_episode_ends() -> None:
    demos = _synthetic(episodes=2, length=4)
    chunks, mask = action_chunks(demos, 3)
    assert mask.sum(axis=1).tolist() == [3, 3, 2, 1, 3, 3, 2, 1]
    np.testing.assert_array_equal(chunks[2, 1], demos.actions[3])
    np.testing.assert_array_equal(chunks[3, 2], demos.actions[3])  # padded with the last action
    np.testing.assert_array_equal(chunks[4, 0], demos.actions[4])


def test_bad_inputs_raise_clear_errors() -> None:
    demos = _synthetic()
    failed = Demonstrations(**{**demos.__dict__, "successes": np.zeros(demos.num_steps, bool)})
    with pytest.raises(ValueError, match="none of the 6 demonstrations succeeded"):
        train_bc_policy(failed, epochs=1)
    loud = Demonstrations(**{**demos.__dict__, "actions": demos.actions * 3})
    with pytest.raises(ValueError, match=r"leave \[-1, 1\]"):
        fit_chunk_predictor(loud, epochs=1)
    with pytest.raises(ValueError, match="chunk_size"):
        action_chunks(demos, 0)
    policy = train_bc_policy(demos, chunk_size=2, epochs=1, hidden=8)
    with pytest.raises(RuntimeError):
        policy(np.zeros((2, 4), np.float32), ["", ""])  # wrong observation width
