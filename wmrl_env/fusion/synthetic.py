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
    wm_std: np.ndarray | None = None  # each member's noise std (real and world model)


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
        noise_spread: heteroscedastic noise: each member's real and world-model noise stds
            are multiplied by their own lognormal(0, ``noise_spread``) factors;
            ``SyntheticBatch.wm_std`` is the std of their sum (what a world model with an
            honest predictive std would report).
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
    noise_spread: float = 0.0

    def sample(self, rng: np.random.Generator, step: int = 0) -> SyntheticBatch:
        m, g = self.num_groups, self.group_size
        group_ids = np.repeat(np.arange(m), g)
        centre = rng.normal(0.5, self.task_spread, size=m)[group_ids]
        true = np.clip(centre + rng.normal(0.0, self.member_spread, size=m * g), 0.0, 1.0)
        real_noise = np.full(true.size, self.real_noise)
        wm_noise = np.full(true.size, self.wm_noise)
        if self.noise_spread > 0:
            real_noise = real_noise * rng.lognormal(0.0, self.noise_spread, true.size)
            wm_noise = wm_noise * rng.lognormal(0.0, self.noise_spread, true.size)
        real = true + real_noise * rng.normal(size=true.size)
        exploit = rng.uniform(size=true.size) < self.exploit_share
        wm = (
            self.distortion(true)
            + rng.normal(0.0, self.group_bias, size=m)[group_ids]
            + self.drift_per_step * step
            + wm_noise * rng.normal(size=true.size)
            + self.exploit_bonus * exploit
        )
        wm_std = np.hypot(real_noise, wm_noise)
        return SyntheticBatch(group_ids, true, real, wm, exploit, wm_std)

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


def simulate_gate(
    runs: int,
    steps: int,
    slope: float | Callable[[np.ndarray], np.ndarray],
    seed: int,
    scales: str = "lognormal",
    std: str = "none",
    std_spread: float = 0.8,
    decay: float = 0.95,
    alpha: float = 0.05,
    groups: int = 2,
    group_size: int = 8,
    beta: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The gate's weight and pooled slope at steps ``1 .. steps - 1`` of ``runs`` simulated
    runs (each ``(runs, steps - 1)``), for an anchor stream whose real centred rewards are
    ``slope * f~`` plus heteroscedastic noise; what :class:`~wmrl_env.fusion.WorldModelGate`
    computes, for many runs at once.

    Each step has ``groups`` anchor groups of ``group_size``, each its own cluster. A cluster's
    calibrated scores and noise share one scale (``"lognormal"``: lognormal(0, 0.7);
    ``"heavy"``: ``|t_2| + 0.05``, infinite variance), so high-leverage clusters are also the
    noisy ones; each member's noise is ``t_5`` times its own std ``scale * sigma_i``
    (``sigma_i`` lognormal(0, ``std_spread``)). ``std`` is what the world model reports to the
    gate: ``"none"`` (unweighted slope), ``"informative"`` (the true ``scale * sigma_i``),
    ``"constant"``, or ``"random"`` (an independent lognormal(0, ``std_spread``) draw). With
    a reported std the slope is fitted by weighted least squares with the exponent learnt as
    in :class:`~wmrl_env.fusion.precision.StdExponent`, or fixed at ``beta`` when given:
    that slope is the second array returned, while the weight is the unweighted slope's, as
    in the gate. ``slope`` may be a function of each member's ``sigma_i``: a slope that
    varies with the std (the unweighted slope is then ``E[slope(sigma)]``).

    >>> weights, slopes = simulate_gate(runs=200, steps=20, slope=0.0, seed=0)
    >>> weights.shape, bool((weights >= 0).all())
    ((200, 19), True)
    """
    from wmrl_env.fusion.gate import slope_bound
    from wmrl_env.fusion.precision import exponent_from_sums, exponent_sums, precision_weights

    rng = np.random.default_rng(seed)
    shape = (runs, steps, groups, 1)
    if scales == "lognormal":
        scale = rng.lognormal(0.0, 0.7, shape)
    elif scales == "heavy":
        scale = np.abs(rng.standard_t(2, shape)) + 0.05
    else:
        raise ValueError(f"scales must be 'lognormal' or 'heavy', got {scales!r}")
    members = (runs, steps, groups, group_size)
    sigma = rng.lognormal(0.0, std_spread, members)
    f = scale * rng.normal(size=members)
    f -= f.mean(-1, keepdims=True)
    slopes = slope(sigma) if callable(slope) else slope
    r = slopes * f + scale * sigma * rng.standard_t(5, members)
    r -= r.mean(-1, keepdims=True)
    reported = {
        "none": None,
        "informative": scale * sigma,
        "constant": np.ones(members),
        "random": rng.lognormal(0.0, std_spread, members),
    }[std]
    sxy, sxx = np.zeros((runs, steps * groups)), np.zeros((runs, steps * groups))
    plain_xy, plain_xx = (r * f).sum(-1).reshape(runs, -1), (f * f).sum(-1).reshape(runs, -1)
    pool = np.zeros((runs, 5))  # the exponent's regression sums
    estimate = np.full(runs, np.nan)
    weights = np.empty((runs, steps - 1))
    estimates = np.empty((runs, steps - 1))
    for step in range(steps):
        v = np.ones((runs, groups, group_size))
        if reported is not None:
            flat = reported[:, step].reshape(runs, -1)
            exponent = exponent_from_sums(pool) if beta is None else np.full(runs, beta)
            v = precision_weights(flat, exponent).reshape(v.shape)
            residuals = r[:, step] - np.nan_to_num(estimate)[:, None, None] * f[:, step]
            pool = decay * pool + exponent_sums(flat, residuals.reshape(runs, -1))
        columns = slice(groups * step, groups * (step + 1))
        sxy[:, columns] = (v * r[:, step] * f[:, step]).sum(-1)
        sxx[:, columns] = (v * f[:, step] ** 2).sum(-1)
        age = np.repeat(decay ** np.arange(step, -1, -1.0), groups)
        k = groups * (step + 1)
        bound = slope_bound(sxy[:, :k] * age, sxx[:, :k] * age, alpha)
        plain = slope_bound(plain_xy[:, :k] * age, plain_xx[:, :k] * age, alpha)
        estimate = bound.estimate
        if step + 1 < steps:  # the weight used at step + 1 pools steps 0..step
            weights[:, step], estimates[:, step] = plain.weight, bound.estimate
    return weights, estimates
