"""Anchor priorities of multi-step groups, from an imagined rollout of the current policy.

A multi-step round draws its anchors at ``reset``, before any action: the real members must
play from the first step. What the world model will get wrong is then estimated by imagining
each group's episode from its start under the current policy (one row per group, batched over
the groups) and reading the model's own uncertainty along it (``StepPrediction.std``, e.g. the
ensemble's disagreement). A group's priority is the expected absolute error of its imagined
episode score, ``sqrt(2 / pi) * sqrt(sum_t std_t^2)`` (Gaussian step errors, independent
across steps), summed over the steps the imagined episode lives (it stops at a predicted
termination); an invalid prediction counts as the batch's largest uncertainty
(:func:`~wmrl_env.fusion.uncertainty_priorities`).

Example:
    >>> import numpy as np
    >>> from wmrl_env.world_models.base import StepPrediction
    >>> class Drift:  # moves by the action; unsure where x > 0
    ...     def predict_step(self, obs, actions):
    ...         nxt = obs + actions
    ...         return StepPrediction(nxt, np.zeros(len(obs)), np.zeros(len(obs), bool),
    ...                               std=np.where(nxt[:, 0] > 0, 1.0, 0.0))
    >>> starts = np.array([[-5.0], [1.0]])
    >>> imagined_priorities(Drift(), lambda obs: np.ones_like(obs), starts, steps=4).round(3)
    array([0.   , 1.596])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from wmrl_env.fusion import uncertainty_priorities
from wmrl_env.world_models.base import DynamicsWorldModel
from wmrl_env.wrappers.world_model_calls import predict_step

__all__ = ["imagined_priorities"]


def imagined_priorities(
    world_model: DynamicsWorldModel,
    policy: Callable[[np.ndarray], Any],
    starts: np.ndarray,
    steps: int,
) -> np.ndarray:
    """One priority per start (``>= 0``): the world model's expected error on the episode
    ``policy`` (a batch of observations -> a batch of actions) plays from it, imagined for at
    most ``steps`` steps. Raises ``ValueError`` for a world model that gives no ``std``."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    observations = np.array(starts, copy=True)
    n = len(observations)
    variance = np.zeros(n)
    alive = np.ones(n, dtype=bool)
    invalid = np.zeros(n, dtype=bool)
    for _ in range(steps):
        rows = np.flatnonzero(alive)
        if rows.size == 0:
            break
        actions = np.asarray(policy(observations[rows]))
        if len(actions) != rows.size:
            raise ValueError(f"the policy gave {len(actions)} actions for {rows.size} observations")
        step, _ = predict_step(world_model, observations[rows], actions)
        if step.std is None:
            raise ValueError(
                "uncertainty-driven anchors need a world model whose predict_step returns a "
                "std (e.g. an ensemble's disagreement)"
            )
        std = np.asarray(step.std, dtype=np.float64)
        good = step.valid & np.isfinite(std)
        variance[rows[good]] += std[good] ** 2
        invalid[rows[~good]] = True
        observations[rows[step.valid]] = step.next_observations[step.valid]
        alive[rows[~step.valid | step.terminations]] = False
    episode_std = np.where(invalid, np.nan, np.sqrt(variance))
    return uncertainty_priorities(np.arange(n), episode_std)
