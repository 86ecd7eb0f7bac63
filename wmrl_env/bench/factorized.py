"""A factorized softmax policy per task: a program's logit is the sum of one weight per
component it is made of, so one execution teaches the policy about every program that
shares a component with it.

A program is a set of components, one value per slot: for the first suite's 72 programs
preprocessing x model x capacity; for the open space's grammar its imputer, transform,
feature step, model family and each of the family's hyperparameters
(:attr:`~wmrl_env.envs.ml_tasks.grammar.GrammarProgram.choices`). With ``Phi`` the 0/1
matrix (programs x components), ``logits = W @ Phi.T`` (``W``: tasks x components, zero at
the start: the uniform distribution over the programs). The policy gradient of
:class:`~wmrl_env.bench.tabular.TabularPolicy` on the logits, ``g``, becomes ``g @ Phi`` on
the weights (the chain rule), and SGD or Adam steps on ``W``.

Example:
    >>> choices = [{"model": m, "scale": s} for m in ("tree", "knn") for s in ("no", "yes")]
    >>> policy = FactorizedPolicy(1, choices, learning_rate=1.0, seed=0)
    >>> policy.update(np.array([0]), np.array([0]), np.array([1.0]))   # tree, no scaling
    >>> policy.probabilities().round(3).tolist()   # knn without scaling rises too
    [[0.534, 0.197, 0.197, 0.072]]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np

from wmrl_env.bench.tabular import TabularPolicy

POLICIES: tuple[str, ...] = ("tabular", "factorized")


def component_matrix(choices: Sequence[Mapping[str, Any]]) -> tuple[np.ndarray, list[str]]:
    """``(Phi, names)``: ``Phi[p, c] = 1`` when program ``p`` has component ``c``, a
    component being one ``slot=value`` pair of the programs' ``choices``.

    >>> phi, names = component_matrix([{"a": 1, "b": "x"}, {"a": 2, "b": "x"}])
    >>> names, phi.tolist()
    (['a=1', 'a=2', 'b=x'], [[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]])
    """
    if not choices:
        raise ValueError("a factorized policy needs each program's components")
    names = sorted({f"{slot}={value}" for c in choices for slot, value in c.items()})
    index = {name: i for i, name in enumerate(names)}
    phi = np.zeros((len(choices), len(names)))
    for p, program in enumerate(choices):
        for slot, value in program.items():
            phi[p, index[f"{slot}={value}"]] = 1.0
    return phi, names


class FactorizedPolicy(TabularPolicy):
    """A softmax over the programs whose logits are sums of per-component weights.

    Args:
        num_tasks: tasks, each with its own weights.
        choices: per program, its components as ``{slot: value}``.
        learning_rate, optimizer, seed: as for
            :class:`~wmrl_env.bench.tabular.TabularPolicy`.
    """

    def __init__(
        self,
        num_tasks: int,
        choices: Sequence[Mapping[str, Any]],
        learning_rate: float,
        optimizer: Literal["sgd", "adam"] = "sgd",
        seed: int = 0,
    ) -> None:
        self.components, self.component_names = component_matrix(choices)
        super().__init__(num_tasks, len(choices), learning_rate, optimizer, seed)
        self.weights = np.zeros((num_tasks, self.components.shape[1]))
        self._m = np.zeros_like(self.weights)
        self._v = np.zeros_like(self.weights)

    def update(self, tasks: np.ndarray, programs: np.ndarray, advantages: np.ndarray) -> None:
        """One ascent step on the weights of each task present in the batch."""
        present, gradient = self.logit_gradient(tasks, programs, advantages)
        self._ascend(self.weights, present, gradient[present] @ self.components)
        self.logits = self.weights @ self.components.T


def make_policy(
    kind: str,
    num_tasks: int,
    num_programs: int,
    choices: Sequence[Mapping[str, Any]],
    learning_rate: float,
    optimizer: Literal["sgd", "adam"] = "sgd",
    seed: int = 0,
) -> TabularPolicy:
    """A ``"tabular"`` policy over ``num_programs`` programs or a ``"factorized"`` one over
    the components ``choices`` (one per program)."""
    if kind == "tabular":
        return TabularPolicy(num_tasks, num_programs, learning_rate, optimizer, seed=seed)
    if kind == "factorized":
        if len(choices) != num_programs:
            raise ValueError(
                f"a factorized policy needs the components of each of the {num_programs} "
                f"programs, got {len(choices)}"
            )
        return FactorizedPolicy(num_tasks, choices, learning_rate, optimizer, seed=seed)
    raise ValueError(f"policy must be one of {POLICIES}, got {kind!r}")
