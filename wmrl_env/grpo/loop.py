"""A minimal GRPO loop on a :class:`~wmrl_env.WorldModelVectorEnv`, readable top to bottom.

Each iteration plays one round (``reset``, then ``step`` until every episode has ended),
takes the fused per-trajectory ``advantage`` from the last step's ``info`` (the fusion has
already centred it per group, scaled it and multiplied in the inverse-variance weight), and
runs a few epochs of the clipped policy-gradient objective over every step of the round::

    ratio_t = exp(log pi(a_t | o_t) - log pi_old(a_t | o_t))
    loss    = -mean over active steps of min(ratio_t * A, clip(ratio_t, 1 +- eps) * A)

where ``A`` is the advantage of the step's trajectory. No value function, no reference-model
KL (add one for LLM policies). Each iteration logs the mean fused, real (anchors) and,
when ``true_reward`` is given, true reward, plus kappa, anchors and the seconds spent in real
execution and in the world model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from gymnasium import spaces

from wmrl_env.grpo.policies import Policy
from wmrl_env.utils.imports import require
from wmrl_env.wrappers.info import batch_diagnostics

torch = require("torch", "wmrl_env.grpo")

__all__ = ["GRPOConfig", "Rollout", "collect_rollout", "grpo_loss", "train"]

OPTIMIZERS: tuple[str, ...] = ("adam", "sgd")


@dataclass
class GRPOConfig:
    """Hyper-parameters of :func:`train`."""

    iterations: int = field(default=100, metadata={"help": "rounds to play, one update each"})
    learning_rate: float = field(default=1e-2, metadata={"help": "the optimizer's learning rate"})
    optimizer: str = field(
        default="adam",
        metadata={"help": "'adam' (torch defaults) or 'sgd' (plain gradient steps, no momentum)"},
    )
    update_epochs: int = field(default=4, metadata={"help": "gradient steps per round"})
    clip_coef: float = field(default=0.2, metadata={"help": "PPO-style ratio clip"})
    ent_coef: float = field(default=0.0, metadata={"help": "entropy bonus coefficient"})
    max_grad_norm: float = field(default=1.0, metadata={"help": "gradient-norm clip"})
    seed: int = field(default=0, metadata={"help": "seed of the first reset (group starts)"})
    max_rounds_without_real: int = field(
        default=5,
        metadata={
            "help": "rounds in a row whose anchors all lack a real result before training "
            "stops with an error (0: never)"
        },
    )

    def __post_init__(self) -> None:
        if self.iterations < 1 or self.update_epochs < 1:
            raise ValueError("iterations and update_epochs must be >= 1")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be positive, got {self.learning_rate}")
        if self.max_rounds_without_real < 0:
            raise ValueError("max_rounds_without_real must be >= 0")
        if not 0 < self.clip_coef < 1:
            raise ValueError(f"clip_coef must be in (0, 1), got {self.clip_coef}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")


@dataclass
class Rollout:
    """One round: per step, the batched observations, actions (as sampled, and as executed:
    clipped to a Box), old log-probs, active mask, next observations, terminations, info."""

    observations: list[Any] = field(default_factory=list)
    actions: list[np.ndarray] = field(default_factory=list)
    log_probs: list[torch.Tensor] = field(default_factory=list)
    active: list[np.ndarray] = field(default_factory=list)
    infos: list[dict[str, Any]] = field(default_factory=list)
    executed_actions: list[Any] = field(default_factory=list)
    next_observations: list[Any] = field(default_factory=list)
    terminated: list[np.ndarray] = field(default_factory=list)

    @property
    def final_info(self) -> dict[str, Any]:
        return self.infos[-1]


def collect_rollout(envs: Any, policy: Policy, seed: int | None = None) -> Rollout:
    """Play one round with ``policy``; stop when every episode has ended."""
    rollout = Rollout()
    observations, _ = envs.reset(seed=seed)
    action_space = envs.single_action_space
    while True:
        actions, log_probs = policy.act(observations)
        if isinstance(action_space, spaces.Box):
            env_actions = np.clip(actions, action_space.low, action_space.high)
        else:
            env_actions = actions
        next_observations, _, terminated, truncated, info = envs.step(env_actions)
        rollout.observations.append(observations)
        rollout.actions.append(actions)
        rollout.log_probs.append(log_probs)
        rollout.active.append(np.asarray(info.get("active", np.ones(envs.num_envs, bool))))
        rollout.infos.append(info)
        rollout.executed_actions.append(env_actions)
        rollout.next_observations.append(next_observations)
        rollout.terminated.append(np.asarray(terminated))
        observations = next_observations
        if np.all(terminated | truncated):
            return rollout


def grpo_loss(
    policy: Policy, rollout: Rollout, advantages: torch.Tensor, config: GRPOConfig
) -> tuple[torch.Tensor, dict[str, float]]:
    """The clipped objective over every active step of the round (token-level mean)."""
    total = torch.zeros(())
    entropy = torch.zeros(())
    steps, clipped, kl = 0, 0.0, 0.0
    for observations, actions, old, active in zip(
        rollout.observations, rollout.actions, rollout.log_probs, rollout.active, strict=True
    ):
        mask = torch.as_tensor(active, dtype=torch.bool)
        new = policy.log_prob(observations, actions)
        ratio = torch.exp(new - old)
        unclipped = ratio * advantages
        clipped_ratio = torch.clamp(ratio, 1 - config.clip_coef, 1 + config.clip_coef)
        surrogate = torch.minimum(unclipped, clipped_ratio * advantages)
        total = total - surrogate[mask].sum()
        if config.ent_coef and hasattr(policy, "entropy"):
            entropy = entropy + policy.entropy(observations)[mask].sum()
        with torch.no_grad():
            clipped += float(((ratio - 1).abs() > config.clip_coef)[mask].float().sum())
            kl += float((old - new)[mask].sum())
        steps += int(mask.sum())
    steps = max(steps, 1)
    loss = (total - config.ent_coef * entropy) / steps
    return loss, {"clipfrac": clipped / steps, "approx_kl": kl / steps}


def train(
    envs: Any,
    policy: Policy,
    config: GRPOConfig,
    true_reward: Callable[[Rollout], np.ndarray] | None = None,
    log: Callable[[dict[str, Any]], None] | None = None,
    on_round: Callable[[Rollout], None] | None = None,
) -> list[dict[str, Any]]:
    """Train ``policy`` on ``envs`` for ``config.iterations`` rounds; returns the log rows.

    ``true_reward(rollout)`` (optional) gives each trajectory's true reward, for logging only
    (e.g. a synthetic task's ground truth); ``on_round(rollout)`` sees every round after the
    policy update and before its row is logged (e.g. to refit a world model on the anchors'
    real transitions, :func:`~wmrl_env.grpo.transitions.anchor_transitions`); ``log``
    receives each row as it is made.
    """
    optimizer = _make_optimizer(policy, config)
    history: list[dict[str, Any]] = []
    blind_rounds = 0  # rounds in a row whose anchors returned no real result
    for iteration in range(config.iterations):
        rollout = collect_rollout(envs, policy, seed=config.seed if iteration == 0 else None)
        info = rollout.final_info
        blind_rounds = _count_blind_rounds(info, blind_rounds, config.max_rounds_without_real)
        advantages = np.asarray(info["advantage"], dtype=np.float32)
        if not np.isfinite(advantages).all():
            raise ValueError("the env returned non-finite advantages")
        advantages_t = torch.as_tensor(advantages)
        for _ in range(config.update_epochs):
            loss, stats = grpo_loss(policy, rollout, advantages_t, config)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), config.max_grad_norm)
            optimizer.step()
        if on_round is not None:
            on_round(rollout)
        row = _log_row(iteration, rollout, float(loss.detach()), stats, true_reward)
        history.append(row)
        if log is not None:
            log(row)
    return history


def _make_optimizer(policy: Policy, config: GRPOConfig) -> torch.optim.Optimizer:
    """The optimizer ``config`` names, over the policy's parameters.

    >>> policy = torch.nn.Linear(2, 1)
    >>> type(_make_optimizer(policy, GRPOConfig(optimizer="sgd"))).__name__
    'SGD'
    """
    kind = torch.optim.SGD if config.optimizer == "sgd" else torch.optim.Adam
    return kind(policy.parameters(), lr=config.learning_rate)


def _log_row(
    iteration: int,
    rollout: Rollout,
    loss: float,
    stats: dict[str, float],
    true_reward: Callable[[Rollout], np.ndarray] | None,
) -> dict[str, Any]:
    info = rollout.final_info
    batch = batch_diagnostics(info)
    real = np.asarray(info["real_score"], dtype=np.float64)
    timings = [batch_diagnostics(i) for i in rollout.infos]
    return {
        "iteration": iteration,
        "reward_mean": _nanmean(info["fused_reward"]),
        "real_reward_mean": _nanmean(real),
        "true_reward_mean": float(np.mean(true_reward(rollout))) if true_reward else float("nan"),
        "kappa": batch.get("kappa", float("nan")),
        "n_anchor_groups": batch.get("n_anchor_groups", 0),
        "n_failed": batch.get("n_failed", 0),
        "real_exec_seconds": sum(t.get("real_exec_seconds", 0.0) for t in timings),
        "real_wall_seconds": sum(t.get("real_wall_seconds", 0.0) for t in timings),
        "wm_seconds": sum(t.get("wm_seconds", 0.0) for t in timings),
        "episode_steps": len(rollout.infos),
        "loss": loss,
        **stats,
        "fusion": batch,  # every batch diagnostic of the round's last step
    }


def _count_blind_rounds(info: dict[str, Any], blind_rounds: int, limit: int) -> int:
    """Rounds in a row whose anchors all lack a real result, this one included; raises at
    ``limit`` (rounds without anchors, e.g. method ``wm``, neither count nor reset it)."""
    is_anchor = np.asarray(info.get("is_anchor", ()), dtype=bool)
    if not is_anchor.any():
        return blind_rounds
    real = np.asarray(info["real_score"], dtype=np.float64)[is_anchor]
    if np.isfinite(real).any():
        return 0
    blind_rounds += 1
    if limit and blind_rounds >= limit:
        statuses = sorted(set(np.asarray(info.get("exec_status", ()))[is_anchor].tolist()))
        raise RuntimeError(
            f"no anchor has returned a real result for {blind_rounds} rounds (statuses of "
            f"the last: {statuses}): training would go on without real signal. Check the "
            "executor; GRPOConfig.max_rounds_without_real sets this limit"
        )
    return blind_rounds


def _nanmean(values: Any) -> float:
    values = np.asarray(values, dtype=np.float64)
    return float(np.nanmean(values)) if np.isfinite(values).any() else float("nan")
