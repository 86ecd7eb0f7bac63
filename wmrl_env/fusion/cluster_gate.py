"""One evidence gate per cluster: each task's world-model weight from that task's anchors.

:class:`~wmrl_env.fusion.gate.WorldModelGate` gives every group one weight ``lam``, bounded on
the slope pooled over all tasks. Its never-worse range ``[0, 2 lam*]`` is the pooled slope's:
when one policy is shared by every task, that is the range that matters. When each task has
parameters of its own (per-task policies, a per-task head), a task's update is never worse
than ignoring the world model only if *its own* weight lies in ``[0, 2 lam*_t]`` — and a world
model good on some tasks and wrong on others opens the pooled gate and trains the tasks where
it is wrong toward its favourites.

:class:`ClusterGates` keeps one ``WorldModelGate`` per cluster label (the ``clusters`` a step
is given, e.g. the task), fed only that cluster's anchor pairs; inside a cluster each
(step, group) is a sub-cluster for the standard error. A sample's weight is its own
cluster's (0 for a cluster without evidence yet), fixed before the step's draw, so PPI stays
unbiased. Every cluster's gate ages every step (decay, ``horizon``); a cluster whose evidence
is all forgotten is dropped, so a step costs one update per cluster still remembered, not per
step of the run. ``weight`` is the mean over the remembered clusters (a diagnostic).

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> gates = ClusterGates()
    >>> for _ in range(24):
    ...     f = rng.normal(size=32)
    ...     real = np.r_[0.8 * f[:16], -0.5 * f[16:]] + 0.3 * rng.normal(size=32)
    ...     _ = gates.update(real, f, np.repeat([0, 1, 2, 3], 8), np.repeat(["a", "b"], 16))
    >>> a, b, new = gates.weights_for(np.array(["a", "b", "new"]))
    >>> bool(a > 0.5), float(b), float(new)
    (True, 0.0, 0.0)
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Any

import numpy as np

from wmrl_env.fusion.gate import HORIZON, WorldModelGate, _hashable

__all__ = ["ClusterGates"]


class ClusterGates:
    """One evidence gate per cluster (task): each sample's world-model weight from its own
    cluster's anchors (arguments as :class:`~wmrl_env.fusion.gate.WorldModelGate`'s)."""

    def __init__(
        self, decay: float = 0.95, alpha: float = 0.05, horizon: int | None = HORIZON
    ) -> None:
        WorldModelGate(decay, alpha, horizon)  # checks the arguments
        self.decay, self.alpha, self.horizon = decay, alpha, horizon
        self.gates: dict[Hashable, WorldModelGate] = {}
        self.steps = 0

    @property
    def num_clusters(self) -> int:
        """Clusters with evidence in a gate."""
        return len(self.gates)

    @property
    def weight(self) -> float:
        """The mean weight over the remembered clusters (0 without any)."""
        return float(np.mean([g.weight for g in self.gates.values()])) if self.gates else 0.0

    @property
    def estimate(self) -> float:
        """The mean of the clusters' slopes where they have one (a diagnostic)."""
        return _mean([g.estimate for g in self.gates.values()])

    @property
    def standard_error(self) -> float:
        """The mean of the clusters' standard errors where they have one (a diagnostic)."""
        return _mean([g.standard_error for g in self.gates.values()])

    @property
    def dof(self) -> float:
        return _mean([g.dof for g in self.gates.values()])

    def weights_for(self, clusters: Any) -> np.ndarray:
        """Per entry of ``clusters``, its cluster's weight (0 for one without evidence)."""
        if clusters is None:
            raise ValueError("gate_scope='cluster' needs clusters= (e.g. each group's task)")
        empty = _NO_GATE
        return np.array([self.gates.get(_hashable(c), empty).weight for c in clusters])

    def update(
        self,
        real: np.ndarray,
        calibrated: np.ndarray,
        groups: np.ndarray,
        clusters: np.ndarray | None = None,
        weights: np.ndarray | None = None,
        std: np.ndarray | None = None,
    ) -> float:
        """One step's anchor pairs (as :meth:`WorldModelGate.update`, ``clusters`` required
        where there are pairs); every cluster's gate ages. Returns :attr:`weight`."""
        real, calibrated = np.asarray(real, float), np.asarray(calibrated, float)
        groups = np.asarray(groups)
        if real.size and clusters is None:
            raise ValueError(
                "gate_scope='cluster' needs each anchor pair's cluster: pass clusters= "
                "(e.g. the task of each group) to step() / observe_anchors()"
            )
        labels = [] if not real.size else [_hashable(c) for c in clusters]
        w = np.ones(real.size) if weights is None else np.asarray(weights, float)
        for label in dict.fromkeys(labels):
            self.gates.setdefault(label, WorldModelGate(self.decay, self.alpha, self.horizon))
        by_label: dict[Hashable, list[int]] = {}
        for i, label in enumerate(labels):
            by_label.setdefault(label, []).append(i)
        for label, gate in list(self.gates.items()):
            rows = np.array(by_label.get(label, []), dtype=np.intp)
            sd = None if std is None else np.asarray(std, float)[rows]
            gate.update(real[rows], calibrated[rows], groups[rows], None, w[rows], sd)
            if gate.num_clusters == 0:  # all its evidence forgotten
                del self.gates[label]
        self.steps += 1
        return self.weight

    def state_dict(self) -> dict[str, Any]:
        return {
            "scope": "cluster",
            "steps": self.steps,
            "gates": [(label, gate.state_dict()) for label, gate in self.gates.items()],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("scope") != "cluster":
            raise ValueError("this state is a pooled gate's; build the fusion with that scope")
        self.steps = int(state["steps"])
        self.gates = {}
        for label, gate_state in state["gates"]:
            gate = WorldModelGate(self.decay, self.alpha, self.horizon)
            gate.load_state_dict(gate_state)
            self.gates[_hashable(label)] = gate


def _mean(values: list[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return float(np.mean(finite)) if finite else math.nan


_NO_GATE = WorldModelGate()  # weight 0: a cluster without evidence
