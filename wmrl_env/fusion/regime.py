"""A fast model of the paper's regime, for statistical tests of the fusion on a training run.

From ``/work/shared/sim/regime_sim.py``: many synthetic tasks (150 train, 50 held out), 72
programs with features, a task-conditioned softmax policy trained by GRPO (Adam), 20 groups of
8 per round, 2 of them anchors. True score ``r(t, p) = sigmoid(u_t' W z_p + c_p)``; the world
model is the same formula with perturbed parameters plus noise (its quality is swept), or
uniform random scores. :func:`train` returns the final held-out score (normalised by the best
program of each task) and the real executions spent. Arms: ``"anchors"`` (GRPO on the anchor
groups alone, the same real budget, no world model) and every fusion method.

Example:
    >>> score, executions = train(Regime(rounds=5), "ppi", "good", seed=0)
    >>> 0.0 < score <= 1.0, executions
    (True, 80)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import spearmanr

from wmrl_env.fusion.reward_fusion import RewardFusion

QUALITIES = {  # name -> (parameter error, prediction noise); None: uniform random scores
    "exact": (0.0, 0.05),
    "good": (0.3, 0.05),
    "fair": (0.6, 0.1),
    "poor": (1.2, 0.1),
    "bad": (3.0, 0.2),
    "random": None,
}


@dataclass(frozen=True)
class Regime:
    programs: int = 72
    task_features: int = 8
    program_features: int = 6
    train_tasks: int = 150
    heldout_tasks: int = 50
    groups: int = 20
    group_size: int = 8
    anchor_groups: int = 2
    rounds: int = 60
    learning_rate: float = 0.05
    noise_spread: float = 0.0  # > 0: each (task, program)'s noise std times lognormal(0, this)


@dataclass(frozen=True)
class World:
    task_features: np.ndarray  # U, (tasks, K)
    true_scores: np.ndarray  # R, (tasks, programs)
    wm_scores: np.ndarray | None  # the world model's mean prediction; None: random
    wm_noise: float
    noise_scale: np.ndarray | None = None  # per (task, program) factor on wm_noise


def make_world(regime: Regime, quality: str, seed: int) -> World:
    g = np.random.default_rng(seed)
    z = g.normal(size=(regime.programs, regime.program_features))
    w = g.normal(size=(regime.task_features, regime.program_features)) * 0.6
    c = g.normal(size=regime.programs) * 0.5
    u = g.normal(size=(regime.train_tasks + regime.heldout_tasks, regime.task_features))
    true = 1 / (1 + np.exp(-(u @ w @ z.T + c)))
    if QUALITIES[quality] is None:
        return World(u, true, None, 0.0)
    err, noise = QUALITIES[quality]
    g = np.random.default_rng(seed + 99)
    w2 = w + g.normal(size=w.shape) * err
    c2 = c + g.normal(size=c.shape) * err
    scale = None
    if regime.noise_spread > 0:
        scale = np.random.default_rng(seed + 199).lognormal(0.0, regime.noise_spread, true.shape)
    return World(u, true, 1 / (1 + np.exp(-(u @ w2 @ z.T + c2))), noise, scale)


def within_task_spearman(world: World) -> float:
    if world.wm_scores is None:
        return 0.0
    rows = zip(world.wm_scores, world.true_scores, strict=True)
    return float(np.mean([spearmanr(a, b).correlation for a, b in rows]))


def train(
    regime: Regime,
    arm: str,
    quality: str,
    seed: int,
    trace: list[dict[str, Any]] | None = None,
    wm_std: str = "none",
    **fusion_args: Any,
) -> tuple[float, int]:
    """Train one policy; returns (final held-out score, real executions).

    ``fusion_args`` go to :class:`RewardFusion` (e.g. ``wm_gate="off"``); ``trace``, when
    given, receives each round's fusion metrics. Each group's task is its gate cluster.
    ``wm_std``: the predictive std the world model reports to the fusion: ``"none"``,
    ``"informative"`` (its noise std, ``wm_noise`` times the world's ``noise_scale``) or
    ``"random"`` (an independent lognormal draw of the same spread)."""
    if wm_std not in ("none", "informative", "random"):
        raise ValueError(f"wm_std must be 'none', 'informative' or 'random', got {wm_std!r}")
    world = make_world(regime, quality, seed)
    u, true = world.task_features, world.true_scores
    rng = np.random.default_rng(seed + 7)
    theta = np.zeros((regime.task_features, regime.programs))
    first, second = np.zeros_like(theta), np.zeros_like(theta)
    fusion = RewardFusion(
        method="real" if arm == "anchors" else arm,
        anchor_fraction=regime.anchor_groups / regime.groups,
        seed=seed,
        **fusion_args,
    )
    n_groups = regime.anchor_groups if arm == "anchors" else regime.groups
    g_size = regime.group_size
    executions = 0
    std_rng = np.random.default_rng(seed + 313)  # apart from the policy's draws
    for _ in range(regime.rounds):
        tasks = rng.choice(regime.train_tasks, n_groups, replace=False)
        logits = u[tasks] @ theta
        policy = np.exp(logits - logits.max(1, keepdims=True))
        policy /= policy.sum(1, keepdims=True)
        actions = np.array([rng.choice(regime.programs, g_size, p=p) for p in policy])
        group_ids = np.repeat(np.arange(n_groups), g_size)
        real = true[tasks[:, None], actions].ravel()
        noise = np.full(real.size, world.wm_noise)
        if world.noise_scale is not None:
            noise = noise * world.noise_scale[tasks[:, None], actions].ravel()
        if world.wm_scores is None:
            wm = rng.uniform(size=real.size)
        else:
            wm = world.wm_scores[tasks[:, None], actions].ravel()
            wm = wm + noise * rng.normal(size=wm.size)
        reported = {
            "none": None,
            "informative": noise,
            "random": std_rng.lognormal(0.0, max(regime.noise_spread, 0.5), real.size),
        }[wm_std]
        anchors = np.asarray(fusion.select_anchors(group_ids), bool)
        executions += int(anchors.sum())
        wm_in = None if arm == "anchors" else wm
        clusters = np.repeat(tasks, g_size)
        out = fusion.step(
            group_ids,
            wm_in,
            np.where(anchors, real, np.nan),
            clusters=clusters,
            wm_std=None if arm == "anchors" else reported,
        )
        if trace is not None:
            trace.append(out.metrics)
        advantages = out.advantages.reshape(n_groups, g_size)
        grad = np.zeros_like(theta)
        for i in range(n_groups):
            onehot = np.zeros((g_size, regime.programs))
            onehot[np.arange(g_size), actions[i]] = 1
            grad += np.outer(u[tasks[i]], ((onehot - policy[i]) * advantages[i][:, None]).sum(0))
        grad /= n_groups * g_size
        first = 0.9 * first + 0.1 * grad
        second = 0.999 * second + 0.001 * grad**2
        theta += regime.learning_rate * first / (np.sqrt(second) + 1e-8)
    held = np.arange(regime.train_tasks, regime.train_tasks + regime.heldout_tasks)
    best = (u[held] @ theta).argmax(1)
    score = true[held, best].mean() / true[held].max(1).mean()
    return float(score), executions
