"""The robot bench's world model and demonstration chunks, on a synthetic system: a state
moves by the chunk's summed action, and the task succeeds once its first coordinate is
above 1."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from wmrl_env.bench.robotics.demos import chunk_transitions
from wmrl_env.bench.robotics.world_model import (
    RandomWorldModel,
    SuccessClassifier,
    SuccessWorldModel,
    predictor_auc,
)

CHUNK = 2


def demonstrations(episodes: int = 40, length: int = 12, seed: int = 0) -> SimpleNamespace:
    rng = np.random.default_rng(seed)
    rows = {k: [] for k in ("observations", "actions", "next_observations", "successes")}
    episode = []
    for index in range(episodes):
        state = rng.normal(0, 0.2, 3)
        drift = rng.uniform(-0.05, 0.25)  # some episodes climb past 1, others do not
        for _ in range(length):
            action = np.array([drift + rng.normal(0, 0.02)])
            following = state + np.array([action[0], 0.0, 0.0])
            values = (state, action, following, following[0] > 1.0)
            for key, value in zip(rows, values, strict=True):
                rows[key].append(value)
            episode.append(index)
            state = following
    return SimpleNamespace(**{k: np.asarray(v) for k, v in rows.items()}, episode=np.array(episode))


def test_chunks_follow_episodes_and_stop_at_the_first_success():
    demos = demonstrations(episodes=6, length=5)
    chunks = chunk_transitions(demos, CHUNK)
    assert chunks.actions.shape[1:] == (CHUNK, 1)
    # chunks start every CHUNK steps of each episode; a success ends the episode's chunks
    expected = []
    for episode in range(6):
        steps = np.flatnonzero(demos.episode == episode)
        first = np.flatnonzero(demos.successes[steps])
        end = first[0] + 1 if first.size else len(steps)
        expected.append(demos.observations[steps[:end:CHUNK]])
    assert np.allclose(np.concatenate(expected), chunks.observations)
    assert chunks.terminations.sum() == sum(
        demos.successes[demos.episode == e].any() for e in range(6)
    )
    with pytest.raises(ValueError, match="chunk_size"):
        chunk_transitions(demos, 0)


@pytest.fixture(scope="module")
def fitted():
    pytest.importorskip("torch", reason="the dynamics ensemble needs torch")
    from wmrl_env.world_models.dynamics.ensemble import EnsembleConfig, EnsembleDynamicsModel

    chunks = chunk_transitions(demonstrations(), CHUNK)
    dynamics = EnsembleDynamicsModel(
        3, CHUNK, EnsembleConfig(ensemble_size=2, hidden_sizes=(32,), max_epochs=150, seed=0)
    )
    model = SuccessWorldModel(dynamics, SuccessClassifier())
    model.refit(chunks)
    return model, chunks


def test_classifier_rewards_telescope_and_success_terminates(fitted):
    model, _ = fitted
    states = np.array([[0.2, 0.0, 0.0], [0.95, 0.0, 0.0], [1.5, 0.0, 0.0]], np.float32)
    chunks = np.full((3, CHUNK, 1), 0.2, np.float32)
    step = model.predict_step(states, chunks)
    p_after = model.classifier.probability(step.next_observations)
    p_before = model.classifier.probability(states)
    assert np.allclose(step.rewards, p_after - p_before)
    assert step.terminations.tolist() == (p_after > 0.5).tolist()
    assert not step.terminations[0] and step.terminations[2]  # far below, far above
    assert step.valid.all() and step.std.shape == (3,)


def test_predictor_auc_ranks_successes_above_failures(fitted):
    model, chunks = fitted
    auc = predictor_auc(model, chunks)
    assert auc.held_out_successes == int(chunks.rewards.sum()) > 0
    assert auc.classifier > 0.9  # the classifier sees the success coordinate itself
    assert 0.0 <= auc.termination <= 1.0


def test_one_class_classifier_is_constant_and_refits_when_both_appear():
    classifier = SuccessClassifier().fit(np.zeros((4, 2)), np.zeros(4, bool))
    assert classifier.probability(np.ones((2, 2))).tolist() == [0.0, 0.0]
    classifier.fit(np.ones((4, 2)), np.ones(4, bool))
    assert classifier.probability(np.ones((1, 2)))[0] > 0.5
    assert np.isnan(classifier.probability(np.array([[np.nan, 0.0]]))[0])


def test_random_world_model_moves_nothing_and_never_ends():
    model = RandomWorldModel(seed=1)
    states = np.arange(6.0).reshape(3, 2)
    step = model.predict_step(states, np.zeros((3, CHUNK, 1)))
    assert np.array_equal(step.next_observations, states)
    assert ((step.rewards >= 0) & (step.rewards < 0.1)).all() and not step.terminations.any()


def test_a_copied_world_model_predicts_and_refits_like_the_original(fitted):
    """The bench pretrains once per seed and hands each arm a copy: the copy must be
    independent of the original and refit exactly as the original would (weights, optimiser
    moments, data buffer and generators all copied)."""
    from wmrl_env.bench.robotics.start import copy_model

    model, chunks = fitted
    twin, other = copy_model(model), copy_model(model)
    assert twin.dynamics.torch is model.dynamics.torch  # the module is shared, not copied
    before = model.predict_step(chunks.observations, chunks.actions)
    more = chunk_transitions(demonstrations(episodes=6, seed=1), CHUNK)
    twin.refit(more)
    other.refit(more)
    after = [m.predict_step(chunks.observations, chunks.actions) for m in (twin, other)]
    assert np.array_equal(after[0].next_observations, after[1].next_observations)
    assert np.array_equal(after[0].rewards, after[1].rewards)
    assert not np.array_equal(after[0].next_observations, before.next_observations)
    unchanged = model.predict_step(chunks.observations, chunks.actions)
    assert np.array_equal(unchanged.next_observations, before.next_observations)
    assert len(model.dynamics.buffer) == len(chunks) < len(twin.dynamics.buffer)
