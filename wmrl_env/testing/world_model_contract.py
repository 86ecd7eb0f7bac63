"""The shared conformance tests for every world model."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from wmrl_env.sandboxes.syntax import does_not_parse
from wmrl_env.world_models.base import as_prediction, as_step_prediction
from wmrl_env.world_models.outcomes import STATUSES, OutcomePrediction


def _shared_per_class(test: Any) -> Any:
    """One world model per test class (models are slow to build), made on first use."""
    cls = type(test)
    if "_contract_world_model" not in cls.__dict__:
        cls._contract_world_model = test.make_world_model()
    return cls._contract_world_model


class WorldModelContract:
    """Mixin for outcome world models (``predict(contexts, artifacts)`` and the prediction
    contract ``predict_outcomes(contexts, artifacts, failure_score=...)``).

    Hooks: :meth:`make_world_model`, :meth:`make_inputs`. Set ``batch_tolerance`` when batched
    and one-by-one predictions may differ by padding numerics.
    """

    batch_tolerance: float = 1e-6
    score_range: tuple[float, float] | None = None

    def make_world_model(self) -> Any:
        raise NotImplementedError

    def make_inputs(self, n: int) -> tuple[list[Any], list[Any], np.ndarray]:
        """``n`` contexts, artifacts and their real scores (used by ``update`` if supported)."""
        raise NotImplementedError

    @pytest.fixture
    def world_model(self):
        return _shared_per_class(self)

    def test_predict_shape_and_finite(self, world_model) -> None:
        contexts, artifacts, _ = self.make_inputs(5)
        prediction = as_prediction(
            world_model.predict(contexts, artifacts), n=5, score_range=self.score_range
        )
        assert prediction.scores.shape == (5,)
        assert prediction.valid.all(), prediction.reasons
        if prediction.std is not None:
            assert (prediction.std >= 0).all()

    def test_batched_equals_one_by_one(self, world_model) -> None:
        contexts, artifacts, _ = self.make_inputs(4)
        batched = as_prediction(world_model.predict(contexts, artifacts), n=4).scores
        single = [
            as_prediction(world_model.predict([c], [a]), n=1).scores[0]
            for c, a in zip(contexts, artifacts, strict=True)
        ]
        np.testing.assert_allclose(batched, single, atol=self.batch_tolerance)

    def test_deterministic(self, world_model) -> None:
        contexts, artifacts, _ = self.make_inputs(3)
        first = as_prediction(world_model.predict(contexts, artifacts), n=3).scores
        again = as_prediction(world_model.predict(contexts, artifacts), n=3).scores
        np.testing.assert_array_equal(first, again)

    def test_mismatched_lengths_raise(self, world_model) -> None:
        contexts, artifacts, _ = self.make_inputs(3)
        with pytest.raises(ValueError):
            world_model.predict(contexts, artifacts[:2])

    def test_predict_outcomes_contract(self, world_model) -> None:
        """Every outcome world model returns the prediction contract: status probabilities
        that sum to 1, the expected reward under the failure score, and the pre-gate's
        exact answer for a program that does not compile (known, never a guess)."""
        contexts, artifacts, _ = self.make_inputs(4)
        contexts, artifacts = [*contexts, contexts[0]], [*artifacts, "def broken(:\n"]
        failure = -0.5
        outcome = world_model.predict_outcomes(contexts, artifacts, failure_score=failure)
        assert isinstance(outcome, OutcomePrediction)
        assert outcome.status_probs.shape == (5, len(STATUSES))
        np.testing.assert_allclose(outcome.status_probs.sum(axis=1), 1.0, atol=1e-9)
        assert (outcome.status_probs >= 0).all()
        assert outcome.known.tolist() == [does_not_parse(a) for a in artifacts]
        known = outcome.known
        assert (outcome.status()[known] == "does_not_parse").all()
        assert (outcome.expected_reward[known] == failure).all()
        p_ok, score = outcome.p_ok[~known], outcome.score[~known]
        expected = p_ok * score + (1 - p_ok) * failure
        np.testing.assert_allclose(outcome.expected_reward[~known], expected, rtol=1e-12)
        np.testing.assert_allclose(outcome.error_probs.sum(axis=1), 1.0, atol=1e-9)
        plain = as_prediction(world_model.predict(contexts, artifacts), n=5)
        assert np.isfinite(outcome.score[plain.valid & ~known]).all()
        if self.score_range is not None:
            low, high = self.score_range
            assert ((score >= low) & (score <= high)).all()
        again = world_model.predict_outcomes(contexts, artifacts, failure_score=failure)
        np.testing.assert_array_equal(outcome.status_probs, again.status_probs)

    def test_update_if_supported(self) -> None:
        world_model = self.make_world_model()
        if not hasattr(world_model, "update"):
            pytest.skip(f"{type(world_model).__name__} does not learn online")
        contexts, artifacts, real = self.make_inputs(6)
        world_model.update(contexts, artifacts, real)
        prediction = as_prediction(world_model.predict(contexts, artifacts), n=6)
        assert prediction.valid.all(), prediction.reasons


class DynamicsWorldModelContract:
    """Mixin for dynamics world models (``predict_step(observations, actions)``)."""

    def make_world_model(self) -> Any:
        raise NotImplementedError

    def make_batch(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """``n`` observations and actions."""
        raise NotImplementedError

    @pytest.fixture
    def world_model(self):
        return _shared_per_class(self)

    def test_predict_step_shapes(self, world_model) -> None:
        observations, actions = self.make_batch(6)
        step = as_step_prediction(
            world_model.predict_step(observations, actions), n=6, obs_shape=observations.shape[1:]
        )
        assert step.valid.all()
        assert step.rewards.shape == (6,) and step.terminations.dtype == bool
        if step.std is not None:
            assert (step.std >= 0).all()

    def test_deterministic(self, world_model) -> None:
        observations, actions = self.make_batch(3)
        first = as_step_prediction(
            world_model.predict_step(observations, actions), n=3, obs_shape=observations.shape[1:]
        )
        again = as_step_prediction(
            world_model.predict_step(observations, actions), n=3, obs_shape=observations.shape[1:]
        )
        np.testing.assert_array_equal(first.next_observations, again.next_observations)

    def test_mismatched_batch_raises(self, world_model) -> None:
        observations, actions = self.make_batch(3)
        with pytest.raises(ValueError):
            world_model.predict_step(observations, actions[:2])
