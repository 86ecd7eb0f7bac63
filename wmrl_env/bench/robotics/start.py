"""What every arm of one seed starts from: the behaviour-cloned policy, its demonstrations,
the real task env, the fixed held-out starts, and the pretrained world model.

The base policy comes from :func:`wmrl_env.robotics.make_base_policy` (cached on disk, so each
arm loads a fresh copy of the same weights). The task env plays whole chunks
(:class:`~wmrl_env.integrations.vla.ActionChunking`) with robosuite's sparse success reward
and ends on success; its horizon is the recipe's (the demonstrations').
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from wmrl_env.bench.robotics.config import RobotBenchConfig
from wmrl_env.bench.robotics.demos import chunk_transitions, episode_ids
from wmrl_env.bench.robotics.world_model import (
    PredictorAUC,
    RandomWorldModel,
    SuccessClassifier,
    SuccessWorldModel,
    predictor_auc,
)

__all__ = ["SeedStart", "copy_model", "make_task_env", "prepare_seed"]

HELD_OUT_SHARE = 0.2  # of demonstration episodes, to measure the success predictors


def base_policy(config: RobotBenchConfig, seed: int) -> tuple[Any, Any]:
    """``(policy, demonstrations)`` of ``seed``: a fresh copy of the cached base policy."""
    from wmrl_env.robotics import make_base_policy

    return make_base_policy(config.task, seed=seed, cache_dir=config.cache_dir, **config.recipe)


def make_task_env(task: str, horizon: int, chunk_size: int) -> Any:
    """The real env GRPO plays: a chunk per step, sparse success reward, ends on success."""
    from wmrl_env.envs.robosuite import RobosuiteEnv
    from wmrl_env.integrations.vla import ActionChunking

    env = RobosuiteEnv(task, horizon=horizon, reward_shaping=False, terminate_on_success=True)
    return ActionChunking(env, chunk_size)


@dataclass
class SeedStart:
    """One seed's shared starting point (see the module docstring)."""

    seed: int
    chunk_size: int
    horizon: int
    demos: Any
    eval_seeds: list[int]
    predictor_auc: PredictorAUC | None = None
    pretrained: dict[tuple, Any] = field(default_factory=dict, repr=False)
    """pretrained world models by configuration (each arm gets a copy: pretrained once)"""

    @property
    def episode_chunks(self) -> int:
        return -(-self.horizon // self.chunk_size)

    def world_model(self, config: RobotBenchConfig) -> Any:
        """A fresh world model of the configured kind, pretrained on all the demonstrations
        (trained once per seed and configuration, then copied: the same weights as training
        it again, since its training is seeded)."""
        if config.world_model == "random":
            return RandomWorldModel(self.seed)
        key = (config.success_predictor, config.ensemble_size, config.hidden)
        if key not in self.pretrained:
            model = _untrained_model(config, self, self.demos.observations.shape[1])
            model.refit(chunk_transitions(self.demos, self.chunk_size))
            self.pretrained[key] = model
        return copy_model(self.pretrained[key])


def copy_model(model: Any) -> Any:
    """An independent copy of a world model (weights, optimiser, data buffer, generators); the
    ``torch`` module an ensemble keeps a reference to is shared, not copied."""
    import torch

    return copy.deepcopy(model, memo={id(torch): torch})


def _untrained_model(config: RobotBenchConfig, start: SeedStart, obs_dim: int) -> Any:
    from wmrl_env.world_models.dynamics import EnsembleConfig, EnsembleDynamicsModel

    action_dim = start.chunk_size * start.demos.actions.shape[1]
    ensemble = EnsembleConfig(
        ensemble_size=config.ensemble_size,
        hidden_sizes=(config.hidden, config.hidden),
        max_epochs=100,
        seed=start.seed,
    )
    classifier = SuccessClassifier() if config.success_predictor == "classifier" else None
    return SuccessWorldModel(EnsembleDynamicsModel(obs_dim, action_dim, ensemble), classifier)


def prepare_seed(config: RobotBenchConfig, seed: int) -> SeedStart:
    """The base policy (made and cached if needed), and the success predictors measured on a
    held-out share of the demonstration episodes (world-model arms only)."""
    from wmrl_env.robotics import HELD_OUT_SEED

    policy, demos = base_policy(config, seed)
    probe = policy(np.zeros((1, demos.observations.shape[1]), np.float32), [policy.instruction])
    start = SeedStart(
        seed=seed,
        chunk_size=int(probe.shape[1]),
        horizon=int(demos.metadata["horizon"]),
        demos=demos,
        eval_seeds=[HELD_OUT_SEED + i for i in range(config.eval_starts)],
    )
    if config.world_model == "dynamics" and {"wm", "wmrl", "ppi"} & set(config.arms):
        episodes = episode_ids(demos)
        cut = len(episodes) - max(1, round(HELD_OUT_SHARE * len(episodes)))
        measured = _untrained_model(
            RobotBenchConfig(**{**config.to_dict(), "success_predictor": "classifier"}),
            start,
            demos.observations.shape[1],
        )
        measured.refit(chunk_transitions(demos, start.chunk_size, episodes[:cut]))
        held_out = chunk_transitions(demos, start.chunk_size, episodes[cut:])
        start.predictor_auc = predictor_auc(measured, held_out)
    return start
