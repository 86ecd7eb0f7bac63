"""What every arm of one seed starts from: the behaviour-cloned policy, its demonstrations,
the real task env, the fixed held-out starts, and the pretrained world model.

The base policy comes from :func:`wmrl_env.robotics.make_base_policy` (cached on disk, so each
arm loads a fresh copy of the same weights). The task env plays whole chunks
(:class:`~wmrl_env.integrations.vla.ActionChunking`) with robosuite's sparse success reward
and ends on success; its horizon is the recipe's (the demonstrations'). The arms of a seed
borrow their task envs from one :class:`TaskEnvShelf` rather than each building and closing
its own.
"""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
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

__all__ = ["SeedStart", "TaskEnvShelf", "copy_model", "make_task_env", "prepare_seed"]

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


class TaskEnvShelf:
    """The task envs of one seed, built once and lent to its arms in turn.

    :meth:`lend` is an ``env_fn``: it hands out an env from the shelf, or builds one when the
    shelf is empty; closing the lent env puts it back on the shelf (an env whose ``reset`` or
    ``step`` raised is closed for good). Lending changes no outcome: every episode an executor
    plays starts from ``reset(seed)`` or from a snapshot restored bit for bit, whatever the
    env played before. :meth:`close` closes the shelved envs.

    Example (needs robosuite)::

        shelf = TaskEnvShelf("Lift", horizon=150, chunk_size=10)
        env = shelf.lend()          # built
        env.close()                 # back on the shelf
        assert shelf.lend().env is env.env and shelf.built == 1
    """

    def __init__(self, task: str, horizon: int, chunk_size: int) -> None:
        self.task, self.horizon, self.chunk_size = task, horizon, chunk_size
        self.built = 0
        self._shelf: list[gym.Env] = []
        self._lock = threading.Lock()

    def lend(self) -> gym.Env:
        with self._lock:
            env = self._shelf.pop() if self._shelf else None
            if env is None:
                self.built += 1
        if env is None:
            env = make_task_env(self.task, self.horizon, self.chunk_size)
        return _LentEnv(env, self)

    def _give_back(self, env: gym.Env) -> None:
        with self._lock:
            self._shelf.append(env)

    def close(self) -> None:
        with self._lock:
            shelved, self._shelf = self._shelf, []
        for env in shelved:
            env.close()


class _LentEnv(gym.Wrapper):
    """A shelf's env on loan: ``close`` returns it (see :class:`TaskEnvShelf`)."""

    def __init__(self, env: gym.Env, shelf: TaskEnvShelf) -> None:
        super().__init__(env)
        self._shelf: TaskEnvShelf | None = shelf
        self._failed = False

    def reset(self, **kwargs: Any):
        return self._watched(self.env.reset, **kwargs)

    def step(self, action: Any):
        return self._watched(self.env.step, action)

    def _watched(self, call: Any, *args: Any, **kwargs: Any):
        try:
            return call(*args, **kwargs)
        except BaseException:
            self._failed = True
            raise

    def close(self) -> None:
        shelf, self._shelf = self._shelf, None
        if shelf is None:
            return
        if self._failed:
            self.env.close()
        else:
            shelf._give_back(self.env)


@dataclass
class SeedStart:
    """One seed's shared starting point (see the module docstring)."""

    seed: int
    chunk_size: int
    horizon: int
    demos: Any
    eval_seeds: list[int]
    task_envs: TaskEnvShelf
    """the arms' real envs (``env_fn = start.task_envs.lend``); close it with the seed"""
    predictor_auc: PredictorAUC | None = None
    pretrained: dict[Any, Any] = field(default_factory=dict, repr=False)
    """pretrained world models by configuration (each arm gets a copy: pretrained once)"""

    @property
    def episode_chunks(self) -> int:
        return -(-self.horizon // self.chunk_size)

    def progress_model(self) -> Any:
        """A fresh :class:`~wmrl_env.robotics.progress.ProgressModel` pretrained on all the
        demonstrations (trained once per seed, then copied)."""
        from wmrl_env.robotics.progress import ProgressModel, demonstration_episodes

        if "progress" not in self.pretrained:
            model = ProgressModel(seed=self.seed)
            self.pretrained["progress"] = model.pretrain(demonstration_episodes(self.demos))
        return copy.deepcopy(self.pretrained["progress"])

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
    from wmrl_env.world_models.dynamics.ensemble import EnsembleConfig, EnsembleDynamicsModel

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
    chunk_size, horizon = int(probe.shape[1]), int(demos.metadata["horizon"])
    start = SeedStart(
        seed=seed,
        chunk_size=chunk_size,
        horizon=horizon,
        demos=demos,
        eval_seeds=[HELD_OUT_SEED + i for i in range(config.eval_starts)],
        task_envs=TaskEnvShelf(config.task, horizon, chunk_size),
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
