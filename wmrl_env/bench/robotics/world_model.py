"""The robot bench's world model: the dynamics ensemble plus a success predictor.

:class:`SuccessWorldModel` answers ``predict_step(states, chunks)`` for
:class:`~wmrl_env.WorldModelVectorEnv`: the ensemble
(:class:`~wmrl_env.world_models.dynamics.ensemble.EnsembleDynamicsModel`) moves every state by a
chunk, and success comes from one of two predictors:

* ``"classifier"`` (:class:`SuccessClassifier`): a logistic regression on the state, ``p(s)``.
  A step's reward is ``p(s') - p(s)`` (the rewards of an episode telescope to ``p(last) -
  p(start)``, whatever its length), and the episode ends when ``p(s') > 0.5``;
* ``"termination"``: the ensemble's own reward and termination heads (the reward of a chunk is
  1 when the task first succeeds in it).

Both are pretrained on the demonstrations and refitted on the anchors' real transitions after
every round (:meth:`SuccessWorldModel.refit`). :func:`predictor_auc` measures which predicts
real success better on held-out demonstration episodes. :class:`RandomWorldModel` is the
useless model of the never-worse check: nothing moves, rewards are noise.

Example:
    >>> import numpy as np
    >>> model = RandomWorldModel(seed=0)
    >>> step = model.predict_step(np.zeros((3, 4)), np.zeros((3, 2, 1)))
    >>> step.next_observations.shape, bool(step.terminations.any())
    ((3, 4), False)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from wmrl_env.grpo.transitions import Transitions
from wmrl_env.world_models.base import StepPrediction

__all__ = ["RandomWorldModel", "SuccessClassifier", "SuccessWorldModel", "predictor_auc"]

SUCCESS_THRESHOLD = 0.5


class SuccessClassifier:
    """``p(success | state)``: standardised logistic regression (scikit-learn).

    >>> import numpy as np
    >>> states = np.linspace(-1, 1, 40)[:, None]
    >>> classifier = SuccessClassifier().fit(states, states[:, 0] > 0.3)
    >>> bool(classifier.probability(np.array([[0.9]]))[0] > 0.5)
    True
    """

    def __init__(self) -> None:
        self.states: list[np.ndarray] = []
        self.labels: list[np.ndarray] = []
        self._model: Any = None
        self._constant = 0.0

    def fit(self, states: np.ndarray, successes: np.ndarray) -> SuccessClassifier:
        """Add labelled states and refit on everything seen."""
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        self.states.append(np.asarray(states, np.float64).reshape(len(states), -1))
        self.labels.append(np.asarray(successes, bool).reshape(-1))
        x, y = np.concatenate(self.states), np.concatenate(self.labels)
        if y.all() or not y.any():  # one class: a constant predictor
            self._model, self._constant = None, float(y.mean()) if y.size else 0.0
            return self
        self._model = make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=2000))
        self._model.fit(x, y)
        return self

    def probability(self, states: np.ndarray) -> np.ndarray:
        states = np.asarray(states, np.float64).reshape(len(states), -1)
        if self._model is None:
            return np.full(len(states), self._constant)
        finite = np.isfinite(states).all(axis=1)
        out = np.full(len(states), np.nan)
        if finite.any():
            out[finite] = self._model.predict_proba(states[finite])[:, 1]
        return out


class SuccessWorldModel:
    """Dynamics ensemble + success predictor; see the module docstring.

    Args:
        dynamics: a fitted-or-not :class:`EnsembleDynamicsModel` over flat chunks.
        classifier: a :class:`SuccessClassifier`, or ``None`` for the ensemble's termination
            head.
    """

    def __init__(self, dynamics: Any, classifier: SuccessClassifier | None = None) -> None:
        self.dynamics = dynamics
        self.classifier = classifier

    @property
    def predictor(self) -> str:
        return "termination" if self.classifier is None else "classifier"

    def refit(self, transitions: Transitions) -> None:
        """Add real chunk transitions (demonstrations, anchors) and refit both parts."""
        if len(transitions) == 0:
            return
        self.dynamics.update(
            transitions.observations,
            transitions.flat_actions(),
            transitions.next_observations,
            transitions.rewards,
            transitions.terminations,
        )
        if self.classifier is not None:
            self.classifier.fit(transitions.next_observations, transitions.rewards > 0)

    def predict_step(self, observations: np.ndarray, actions: np.ndarray) -> StepPrediction:
        flat = np.asarray(actions).reshape(len(actions), -1)
        step = self.dynamics.predict_step(observations, flat)
        if self.classifier is None:
            return step
        after = self.classifier.probability(step.next_observations)
        before = self.classifier.probability(observations)
        rewards = after - before
        valid = np.asarray(step.valid, bool) & np.isfinite(rewards)
        return StepPrediction(
            next_observations=step.next_observations,
            rewards=np.where(valid, rewards, 0.0),
            terminations=valid & (after > SUCCESS_THRESHOLD),
            std=step.std,
            valid=valid,
        )


class RandomWorldModel:
    """Nothing moves; each step's reward is uniform noise in ``[0, 0.1)``; never terminates."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)

    def refit(self, transitions: Transitions) -> None:
        """Learns nothing."""

    def predict_step(self, observations: np.ndarray, actions: np.ndarray) -> StepPrediction:
        observations = np.asarray(observations)
        n = len(observations)
        return StepPrediction(
            next_observations=observations.copy(),
            rewards=0.1 * self.rng.random(n),
            terminations=np.zeros(n, bool),
            std=np.zeros(n),
            valid=np.ones(n, bool),
        )


@dataclass(frozen=True)
class PredictorAUC:
    """ROC AUC of each success predictor on held-out demonstration chunks (NaN: one class)."""

    classifier: float
    termination: float
    held_out_chunks: int
    held_out_successes: int


def predictor_auc(model: SuccessWorldModel, held_out: Transitions) -> PredictorAUC:
    """How well each predictor, through the ensemble's one-chunk prediction, ranks the
    held-out chunks that end in success above those that do not."""
    from sklearn.metrics import roc_auc_score

    if model.classifier is None:
        raise ValueError("predictor_auc compares both predictors: give the model a classifier")
    labels = held_out.rewards > 0
    step = model.dynamics.predict_step(held_out.observations, held_out.flat_actions())
    scores = {
        "classifier": model.classifier.probability(step.next_observations),
        "termination": np.asarray(step.rewards, np.float64),
    }
    aucs = {}
    for name, score in scores.items():
        usable = np.isfinite(score)
        both = labels[usable].any() and not labels[usable].all()
        aucs[name] = float(roc_auc_score(labels[usable], score[usable])) if both else np.nan
    return PredictorAUC(
        classifier=aucs["classifier"],
        termination=aucs["termination"],
        held_out_chunks=len(labels),
        held_out_successes=int(labels.sum()),
    )
