"""The bench's policy: one softmax over the 72 programs, conditioned on the task's features.

A :class:`~wmrl_env.grpo.policies.CategoricalPolicy` over program indices whose input is the
feature vector of the task the observation (a task description) names; actions go to the
env as the structured ``[preprocessing, model, capacity]`` triple. The output layer starts
at zero, so every run starts from the uniform distribution over programs.

Example:
    >>> import numpy as np
    >>> policy = TaskConditionedPolicy({"task a": np.ones(3), "task b": -np.ones(3)}, seed=0)
    >>> actions, log_probs = policy.act(np.array(["task a", "task b"], dtype=object))
    >>> actions.shape, round(float(log_probs[0].exp()) * 72, 6)
    ((2, 3), 1.0)
    >>> policy.probabilities(np.ones((1, 3))).shape
    (1, 72)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from wmrl_env.utils.imports import require

torch = require("torch", "wmrl bench's policy")

PROGRAM_SHAPE = (4, 6, 3)  # the structured program space: preprocessing x model x capacity
NUM_PROGRAMS = int(np.prod(PROGRAM_SHAPE))


class TaskConditionedPolicy:
    """Softmax over program indices of a (linear or MLP) map from task features.

    Args:
        features: task description (the env's observation) -> feature vector.
        hidden: MLP width; 0 for a linear map.
        seed: seeds the initial weights and the sampling generator.
    """

    def __init__(self, features: Mapping[str, np.ndarray], hidden: int = 0, seed: int = 0) -> None:
        from wmrl_env.grpo.policies import CategoricalPolicy

        if not features:
            raise ValueError("give the features of at least one task")
        self.features = {k: np.asarray(v, np.float32) for k, v in features.items()}
        size = {v.shape for v in self.features.values()}
        if len(size) != 1 or len(next(iter(size))) != 1:
            raise ValueError(f"every task needs one feature vector of the same length, got {size}")
        (width,) = next(iter(size))
        self.inner = CategoricalPolicy(
            width, [NUM_PROGRAMS], self._encode, hidden=hidden, discrete=True, seed=seed
        )
        last = self.inner.net if hidden == 0 else self.inner.net[-1]
        with torch.no_grad():
            last.weight.zero_()
            last.bias.zero_()

    def _encode(self, observations: Any) -> torch.Tensor:
        if isinstance(observations, torch.Tensor):
            return observations
        rows = np.asarray(observations, dtype=object).ravel()
        try:
            return torch.as_tensor(np.stack([self.features[str(o)] for o in rows]))
        except KeyError as error:
            raise KeyError(f"no features for the task observed: {str(error)[:80]}...") from None

    def act(self, observations: Any) -> tuple[np.ndarray, torch.Tensor]:
        indices, log_probs = self.inner.act(observations)
        return np.stack(np.unravel_index(indices, PROGRAM_SHAPE), axis=1), log_probs

    def log_prob(self, observations: Any, actions: np.ndarray) -> torch.Tensor:
        actions = np.asarray(actions).reshape(-1, len(PROGRAM_SHAPE))
        indices = np.ravel_multi_index(tuple(actions.T), PROGRAM_SHAPE)
        return self.inner.log_prob(observations, indices)

    def parameters(self):
        return self.inner.parameters()

    def probabilities(self, feature_rows: np.ndarray) -> np.ndarray:
        """``(T, 72)`` program distributions for ``T`` tasks' feature rows."""
        with torch.no_grad():
            logits = self.inner.net(torch.as_tensor(np.asarray(feature_rows, np.float32)))
            return torch.softmax(logits, dim=1).double().numpy()
