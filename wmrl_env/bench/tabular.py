"""A tabular softmax policy per task over the program space, trained by policy gradient with
plain SGD or Adam (numpy: the per-task regime's policies are a table of logits).

:meth:`TabularPolicy.update` takes one batch of (task, program, advantage): each task's logits
move along the mean over its trajectories of ``advantage * (onehot(program) - pi)``, the
gradient of the mean log-likelihood weighted by the advantages; tasks without a trajectory
this batch do not move (Adam keeps a step count per task).

Example:
    >>> policy = TabularPolicy(2, 3, learning_rate=1.0, seed=0)
    >>> policy.update(np.array([0, 0]), np.array([1, 2]), np.array([1.0, -1.0]))
    >>> policy.probabilities().round(3).tolist()
    [[0.307, 0.506, 0.186], [0.333, 0.333, 0.333]]
"""

from __future__ import annotations

from typing import Literal

import numpy as np

OPTIMIZERS: tuple[str, ...] = ("sgd", "adam")


class TabularPolicy:
    """``logits[t, p]``, all zero at the start (the uniform distribution over programs).

    Args:
        num_tasks, num_programs: the table's shape.
        learning_rate: the step size.
        optimizer: ``"sgd"`` or ``"adam"`` (betas 0.9 / 0.999, per-task bias correction).
        seed: the sampling generator's seed.
    """

    def __init__(
        self,
        num_tasks: int,
        num_programs: int,
        learning_rate: float,
        optimizer: Literal["sgd", "adam"] = "sgd",
        seed: int = 0,
    ) -> None:
        if optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}")
        if not learning_rate > 0:
            raise ValueError(f"learning_rate must be positive, got {learning_rate}")
        self.logits = np.zeros((num_tasks, num_programs))
        self.learning_rate = learning_rate
        self.optimizer = optimizer
        self.rng = np.random.default_rng(seed)
        self._m = np.zeros_like(self.logits)
        self._v = np.zeros_like(self.logits)
        self._steps = np.zeros(num_tasks, dtype=np.int64)

    def probabilities(self) -> np.ndarray:
        z = self.logits - self.logits.max(axis=1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=1, keepdims=True)

    def sample(self, tasks: np.ndarray, group_size: int) -> np.ndarray:
        """``(len(tasks), group_size)`` programs drawn from each task's distribution."""
        probabilities = self.probabilities()[np.asarray(tasks)]
        cumulative = probabilities.cumsum(axis=1)
        cumulative[:, -1] = 1.0
        draws = self.rng.uniform(size=(len(probabilities), group_size))
        return np.stack(
            [np.searchsorted(c, d, side="right") for c, d in zip(cumulative, draws, strict=True)]
        )

    def update(self, tasks: np.ndarray, programs: np.ndarray, advantages: np.ndarray) -> None:
        """One ascent step on each task present in the batch (NaN advantages count as 0)."""
        present, gradient = self.logit_gradient(tasks, programs, advantages)
        self._ascend(self.logits, present, gradient[present])

    def logit_gradient(
        self, tasks: np.ndarray, programs: np.ndarray, advantages: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(present tasks, d/dlogits)`` of the mean over each task's trajectories of
        ``advantage * log pi(program)`` (rows of absent tasks are 0)."""
        tasks, programs = np.asarray(tasks), np.asarray(programs)
        advantages = np.nan_to_num(np.asarray(advantages, dtype=np.float64))
        present, counts = np.unique(tasks, return_counts=True)
        probabilities = self.probabilities()
        gradient = np.zeros_like(probabilities)
        np.add.at(gradient, (tasks, programs), advantages)
        weight = np.zeros(probabilities.shape[0])
        np.add.at(weight, tasks, advantages)
        gradient -= weight[:, None] * probabilities
        gradient[present] /= counts[:, None]
        return present, gradient

    def _ascend(self, params: np.ndarray, present: np.ndarray, g: np.ndarray) -> None:
        """One SGD or Adam ascent step on the rows ``present`` of ``params`` (gradient ``g``)."""
        if self.optimizer == "sgd":
            params[present] += self.learning_rate * g
            return
        self._steps[present] += 1
        self._m[present] = 0.9 * self._m[present] + 0.1 * g
        self._v[present] = 0.999 * self._v[present] + 0.001 * g**2
        t = self._steps[present][:, None]
        m_hat = self._m[present] / (1 - 0.9**t)
        v_hat = self._v[present] / (1 - 0.999**t)
        params[present] += self.learning_rate * m_hat / (np.sqrt(v_hat) + 1e-8)
