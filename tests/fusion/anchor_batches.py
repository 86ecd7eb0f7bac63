"""Synthetic batches for the anchor-selection tests: a world model whose bias no calibration
map removes, and a ``ppi`` fusion whose gate has opened on such batches."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from wmrl_env.fusion import RewardFusion

Priority = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def biased_batch(rng: np.random.Generator, num_groups: int = 32, group_size: int = 8):
    """``(ids, real, wm, std)``: true rewards; a world model whose error std varies by group
    (and says so), and which over-scores a fifth of the trajectories regardless of their
    reward (non-monotone bias)."""
    ids = np.repeat(np.arange(num_groups), group_size)
    n = num_groups * group_size
    real = np.clip(rng.normal(0.5, 0.2, num_groups)[ids] + rng.normal(0, 0.15, n), 0, 1)
    std = np.repeat(rng.choice([0.02, 0.3], num_groups), group_size)
    wm = real + rng.normal(0, 1, n) * std + 0.3 * (rng.uniform(size=n) < 0.2)
    return ids, real, wm, std


def opened_ppi_fusion(rng: np.random.Generator, priority: Priority) -> RewardFusion:
    """A ``ppi`` fusion (12.5 % anchors) after 12 batches whose anchors ``priority(ids, wm,
    std)`` drew: a history in which the gate opens."""
    fusion = RewardFusion(method="ppi", anchor_fraction=0.125, seed=0)
    for _ in range(12):
        ids, real, wm, std = biased_batch(rng)
        anchors = fusion.select_anchors(ids, priority(ids, wm, std))
        fusion.step(ids, wm, np.where(anchors, real, np.nan))
    assert fusion.wm_weight > 0
    return fusion


def batch_mean_errors(
    fusion: RewardFusion, batch: tuple, priorities: np.ndarray, draws: int = 3000
) -> np.ndarray:
    """Per draw of the anchors from the fusion's current state, the batch-mean PPI reward
    minus the batch-mean real reward."""
    ids, real, wm, _ = batch
    state = fusion.state_dict()
    errors = []
    for draw in range(draws):
        fusion.load_state_dict(state)
        fusion.reseed(draw)
        anchors = fusion.select_anchors(ids, priorities)
        out = fusion.step(ids, wm, np.where(anchors, real, np.nan))
        errors.append(out.rewards.mean() - real.mean())
    return np.asarray(errors)
