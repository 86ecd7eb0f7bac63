"""The shared conformance tests for every world model."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from wmrl_env.world_models.base import as_prediction, as_step_prediction


def _shared_per_class(test: Any) -> Any:
    """One world model per test class (models are slow to build), made on first use."""
    cls = type(test)
    if "_contract_world_model" not in cls.__dict__:
        cls._contract_world_model = test.make_world_model()
    return cls._contract_world_model


class WorldModelContract:
    """Mixin for outcome world models (``predict(contexts, artifacts)``).

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
