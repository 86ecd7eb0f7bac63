"""Synthetic ground truth for the fusion: known true rewards, a world model with known faults.

Each group is one task with mean true reward ``mu_g``; its members' true rewards spread around
it. Real execution observes the true reward plus noise. The world model sees a monotone
distortion of the true reward, plus a bias shared by the group (cancels in GRPO), a bias that
drifts over training steps, noise, and an *exploit*: a share of trajectories it over-scores
regardless of their true reward (bias that is not a monotone function of the score — what a
policy learns to hack).

Example:
    >>> import numpy as np
    >>> world = SyntheticWorld(num_groups=4, group_size=3)
    >>> batch = world.sample(np.random.default_rng(0), step=0)
    >>> batch.group_ids.tolist()
    [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    >>> bool(np.all(batch.wm_scores != batch.true_rewards))
    True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from wmrl_env.fusion.calibration import fit_isotonic_sorted
from wmrl_env.fusion.groups import GroupIndex


def cubic_distortion(x: np.ndarray) -> np.ndarray:
    """A strongly non-linear, increasing distortion of a reward in [0, 1]."""
    return 0.2 + 0.8 * x**3


@dataclass(frozen=True)
class SyntheticBatch:
    group_ids: np.ndarray
    true_rewards: np.ndarray  # what the policy should maximise
    real_scores: np.ndarray  # a real execution of every trajectory (observe anchors only)
    wm_scores: np.ndarray
    exploit: np.ndarray  # trajectories the world model over-scores


@dataclass(frozen=True)
class SyntheticWorld:
    """Generator of batches with known ground truth.

    Args:
        num_groups, group_size: batch shape.
        task_spread: std of the group means ``mu_g``.
        member_spread: std of true rewards within a group.
        real_noise: std of real-execution noise.
        wm_noise: std of world-model noise.
        group_bias: std of a per-group world-model offset.
        drift_per_step: world-model offset added per training step.
        distortion: the monotone map the world model applies to the true reward.
        exploit_share, exploit_bonus: share of trajectories over-scored, and by how much.
    """

    num_groups: int = 64
    group_size: int = 8
    task_spread: float = 0.2
    member_spread: float = 0.15
    real_noise: float = 0.05
    wm_noise: float = 0.05
    group_bias: float = 0.1
    drift_per_step: float = 0.0
    distortion: Callable[[np.ndarray], np.ndarray] = cubic_distortion
    exploit_share: float = 0.0
    exploit_bonus: float = 0.0

    def sample(self, rng: np.random.Generator, step: int = 0) -> SyntheticBatch:
        m, g = self.num_groups, self.group_size
        group_ids = np.repeat(np.arange(m), g)
        centre = rng.normal(0.5, self.task_spread, size=m)[group_ids]
        true = np.clip(centre + rng.normal(0.0, self.member_spread, size=m * g), 0.0, 1.0)
        real = true + rng.normal(0.0, self.real_noise, size=true.size)
        exploit = rng.uniform(size=true.size) < self.exploit_share
        wm = (
            self.distortion(true)
            + rng.normal(0.0, self.group_bias, size=m)[group_ids]
            + self.drift_per_step * step
            + rng.normal(0.0, self.wm_noise, size=true.size)
            + self.exploit_bonus * exploit
        )
        return SyntheticBatch(group_ids, true, real, wm, exploit)

    def oracle_kappa(self, rng: np.random.Generator, batches: int = 200) -> float:
        """kappa under the population calibration map ``E[r | s]`` (isotonic on ~10^5+ pairs
        from ``batches`` fresh batches, evaluated on as many others): the value an estimator
        should track."""
        fit = [self.sample(rng) for _ in range(batches)]
        s = np.concatenate([b.wm_scores for b in fit])
        r = np.concatenate([b.real_scores for b in fit])
        order = np.argsort(s)
        f = fit_isotonic_sorted(s[order], r[order], np.ones(s.size))
        residual_ss = real_ss = 0.0
        for batch in (self.sample(rng) for _ in range(batches)):
            groups = GroupIndex.from_ids(batch.group_ids)
            e = groups.centre(batch.real_scores - f(batch.wm_scores))
            centred_real = groups.centre(batch.real_scores)
            residual_ss += e @ e
            real_ss += centred_real @ centred_real
        return 1.0 + residual_ss / real_ss
