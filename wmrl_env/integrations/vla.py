"""Vision-language-action (VLA) policies as drop-in GRPO policies on a WorldModelVectorEnv.

Three pieces:

* :class:`VLAPolicy`: the inference interface ``policy(observations, instructions) -> action
  chunks`` of shape ``(N, chunk_size, action_dim)``, which OpenVLA-OFT-style models (parallel
  decoding of an action chunk, executed open-loop) satisfy;
* :class:`ActionChunking`: a gymnasium wrapper whose one step executes a whole chunk in the
  real environment (summing rewards, stopping at the first termination), so one policy call
  is one environment step for the vector env, the world model and GRPO alike;
* :class:`ChunkedGaussianPolicy`: turns any differentiable chunk predictor (a torch module
  ``backbone(observations, instructions) -> chunk means``) into the stochastic policy GRPO
  needs (``act`` / ``log_prob`` / ``entropy``, a learned state-independent std), and is itself
  a :class:`VLAPolicy` (its mean chunk). :class:`StateMLPBackbone` is the CPU stand-in for a
  VLA: an MLP over low-dimensional state that ignores the instruction.

For a real VLA on a GPU the backbone is the VLA itself (e.g. OpenVLA-OFT with LoRA adapters:
images + instruction in, its action head's chunk out), observations are camera images, and the
world model for world-model groups is an image world model behind
:class:`~wmrl_env.world_models.dynamics.ensemble.TorchDynamicsAdapter`; see ``docs/robotics.md``.

Example:
    >>> import gymnasium as gym, numpy as np
    >>> env = ActionChunking(gym.make("MountainCarContinuous-v0"), chunk_size=4)
    >>> env.action_space.shape
    (4, 1)
    >>> obs, info = env.reset(seed=0)
    >>> obs, reward, terminated, truncated, info = env.step(np.zeros((4, 1), np.float32))
    >>> info["chunk_steps"]
    4
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym
import numpy as np
from gymnasium.core import ObsType

from wmrl_env.utils.imports import require

__all__ = [
    "ActionChunking",
    "ChunkedGaussianPolicy",
    "StateMLPBackbone",
    "VLAPolicy",
    "dense_progress_envs",
]


@runtime_checkable
class VLAPolicy(Protocol):
    """``policy(observations, instructions)`` -> action chunks ``(N, chunk_size, action_dim)``.

    ``observations`` is the batch as the environment gives it (an array, or a dict of arrays
    for camera observations); ``instructions`` has one language instruction per item.
    """

    def __call__(self, observations: Any, instructions: Sequence[str]) -> np.ndarray: ...


class ActionChunking(gym.Wrapper[ObsType, np.ndarray, ObsType, np.ndarray]):
    """Execute an action chunk ``(chunk_size, *action_shape)`` per step.

    The chunk's actions are played in order until one ends the episode; the step returns the
    last observation, the summed reward, the last ``terminated`` / ``truncated`` flags and
    ``info["chunk_steps"]`` (how many were played). Snapshots pass through to the wrapped env.
    """

    def __init__(self, env: gym.Env, chunk_size: int) -> None:
        super().__init__(env)
        if not isinstance(env.action_space, gym.spaces.Box):
            raise TypeError(f"action chunks need a Box action space, got {env.action_space}")
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
        self.chunk_size = chunk_size
        space = env.action_space
        self.action_space = gym.spaces.Box(
            np.broadcast_to(space.low, (chunk_size, *space.shape)),
            np.broadcast_to(space.high, (chunk_size, *space.shape)),
            dtype=space.dtype,
        )

    def step(self, action: np.ndarray) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        chunk = np.asarray(action)
        if chunk.shape != self.action_space.shape:
            raise ValueError(
                f"action chunk has shape {chunk.shape}, expected {self.action_space.shape}"
            )
        total, played = 0.0, 0
        terminated = truncated = False
        while played < self.chunk_size and not (terminated or truncated):
            observation, reward, terminated, truncated, info = self.env.step(chunk[played])
            total, played = total + float(reward), played + 1
        return observation, total, terminated, truncated, {**info, "chunk_steps": played}


def _torch():
    return require("torch", "the VLA policy adapters")


class StateMLPBackbone:
    """Factory for the CPU stand-in VLA: an MLP from state to a ``tanh`` action chunk.

    ``StateMLPBackbone.build(observation_dim, chunk_size, action_dim)`` returns a torch module
    ``module(observations, instructions) -> (N, chunk_size, action_dim)`` (the instruction is
    ignored: one task per run).
    """

    @staticmethod
    def build(
        observation_dim: int, chunk_size: int, action_dim: int, hidden: int = 128, seed: int = 0
    ) -> Any:
        torch = _torch()
        nn = torch.nn

        class Backbone(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.chunk_size, self.action_dim = chunk_size, action_dim
                self.net = nn.Sequential(
                    nn.Linear(observation_dim, hidden),
                    nn.Tanh(),
                    nn.Linear(hidden, hidden),
                    nn.Tanh(),
                    nn.Linear(hidden, chunk_size * action_dim),
                )
                nn.init.zeros_(self.net[-1].bias)
                nn.init.normal_(self.net[-1].weight, std=0.01)
                # running input normalisation: robot states mix metres, radians and velocities
                self.register_buffer("obs_mean", torch.zeros(observation_dim))
                self.register_buffer("obs_std", torch.ones(observation_dim))

            def set_normalisation(self, observations: np.ndarray) -> None:
                values = torch.as_tensor(np.asarray(observations, np.float32))
                self.obs_mean.copy_(values.mean(0))
                self.obs_std.copy_(values.std(0).clamp_min(1e-3))

            def forward(self, observations: Any, instructions: Sequence[str]) -> Any:
                x = torch.as_tensor(np.asarray(observations, np.float32))
                x = (x - self.obs_mean) / self.obs_std
                out = torch.tanh(self.net(x))
                return out.reshape(-1, self.chunk_size, self.action_dim)

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return Backbone()


class ChunkedGaussianPolicy:
    """A stochastic chunk policy around a deterministic chunk predictor, for GRPO.

    Actions are ``backbone(observations, instructions) + std * noise`` (``std`` learned, one
    per action dimension, shared across the chunk); ``log_prob`` sums over the chunk, so one
    GRPO ratio covers one chunk (one step of an :class:`ActionChunking` env). Calling the
    policy returns the mean chunk: the :class:`VLAPolicy` interface.

    Args:
        backbone: torch module ``(observations, instructions) -> (N, chunk, action_dim)``.
        instruction: the task's language instruction (one task per policy; set
            :attr:`instruction` to change it).
        log_std_init: initial log standard deviation of the exploration noise.
        seed: seeds the exploration noise.
    """

    def __init__(
        self, backbone: Any, instruction: str, log_std_init: float = -1.0, seed: int = 0
    ) -> None:
        torch = _torch()
        self.torch = torch
        self.backbone = backbone
        self.instruction = instruction
        action_dim = backbone.action_dim
        self.log_std = torch.nn.Parameter(torch.full((action_dim,), float(log_std_init)))
        self.generator = torch.Generator().manual_seed(seed)

    def parameters(self):
        yield from self.backbone.parameters()
        yield self.log_std

    def _distribution(self, observations: Any):
        instructions = [self.instruction] * len(observations)
        mean = self.backbone(observations, instructions)
        return self.torch.distributions.Normal(mean, self.log_std.exp().expand_as(mean))

    def __call__(self, observations: Any, instructions: Sequence[str]) -> np.ndarray:
        with self.torch.no_grad():
            return self.backbone(observations, list(instructions)).numpy()

    def act(self, observations: Any) -> tuple[np.ndarray, Any]:
        with self.torch.no_grad():
            dist = self._distribution(observations)
            noise = self.torch.randn(dist.loc.shape, generator=self.generator)
            actions = dist.loc + dist.scale * noise
            return actions.numpy(), dist.log_prob(actions).sum(dim=(1, 2))

    def log_prob(self, observations: Any, actions: np.ndarray) -> Any:
        dist = self._distribution(observations)
        chunks = self.torch.as_tensor(np.asarray(actions, np.float32)).reshape(dist.loc.shape)
        return dist.log_prob(chunks).sum(dim=(1, 2))

    def entropy(self, observations: Any) -> Any:
        return self._distribution(observations).entropy().sum(dim=(1, 2))


def dense_progress_envs(
    env_fn: Callable[[], gym.Env],
    progress: Any,
    num_groups: int = 4,
    group_size: int = 4,
    *,
    chunk_size: int | None = None,
    dense_weight: float = 0.5,
    calibration: str | None = "affine",
    update: bool = True,
    world_model: Any = None,
    fusion: Any = None,
    seed: int = 0,
    **options: Any,
) -> Any:
    """A :class:`~wmrl_env.WorldModelVectorEnv` of GRPO groups whose real episodes pay the
    dense progress reward; the shared
    :class:`~wmrl_env.robotics.dense_reward.ProgressReward` is its ``progress_reward``.

    Each real env (``env_fn``'s, taking action chunks) pays the sparse success fused with the
    progress model's per-step increments, and every round ends with the progress model's
    on-policy check, its update on the round's real episodes and the recalibration
    (``info["batch"]["progress_check"]``). Without a world model every group is played in
    the simulator (``RewardFusion(method="real")``); with one (e.g. a dynamics ensemble) the
    fusion's anchor groups are real and pay the dense reward, the others keep the world
    model's.

    Example (needs robosuite and torch)::

        from wmrl_env.envs.robosuite import RobosuiteEnv
        from wmrl_env.grpo import GRPOConfig, train
        from wmrl_env.robotics import make_base_policy

        policy, demos = make_base_policy("Lift", seed=0)  # chunks of 8 actions, 60 steps
        envs = dense_progress_envs(
            lambda: RobosuiteEnv("Lift", horizon=60, reward_shaping=False,
                                 terminate_on_success=True),
            demos,  # or a pretrained ProgressModel
            num_groups=4, group_size=4, chunk_size=8, max_episode_steps=8,
        )
        history = train(envs, policy, GRPOConfig(iterations=6))
        history[-1]["fusion"]["progress_check"]  # the last round's on-policy check
        envs.close()

    Args:
        env_fn: builds one real env with a Box observation space (the state the progress
            model reads) and ``info["success"]``.
        progress: a pretrained :class:`~wmrl_env.robotics.progress.ProgressModel`, or
            demonstrations to pretrain one on: a
            :class:`~wmrl_env.robotics.demonstrations.Demonstrations` or a list of
            ``(states, succeeded)`` episodes.
        num_groups, group_size: the batch is ``num_groups * group_size`` episodes.
        chunk_size: wrap each env in :class:`ActionChunking` (``None``: ``env_fn``'s
            env already takes chunks, or the policy is not chunked).
        dense_weight: weight of the dense part (1: progress only).
        calibration: ``"affine"`` (default) or ``"isotonic"`` calibration of a progress return
            to the success scale, refitted every round; ``None``: the raw progress return.
        update: update the progress model on every round's real episodes.
        world_model: a multi-step world model for imagined groups; default ``None``: every
            group real (the vector env still steps a placeholder beside the real members, the
            bench's :class:`~wmrl_env.bench.robotics.world_model.RandomWorldModel`, which no
            reward reads).
        fusion: the :class:`~wmrl_env.fusion.RewardFusion`; default ``method="real"`` without
            a world model, ``"wmrl"`` with one.
        seed: the progress model's seed (when pretrained here) and the default fusion's.
        options: the vector env's other keywords (``max_episode_steps``, ``executor``: not
            ``"process"``, ...).
    """
    from wmrl_env.bench.robotics.world_model import RandomWorldModel
    from wmrl_env.fusion import RewardFusion
    from wmrl_env.robotics.dense_reward import ProgressReward
    from wmrl_env.robotics.progress import ProgressModel, demonstration_episodes
    from wmrl_env.wrappers import WorldModelVectorEnv

    if isinstance(progress, ProgressModel):
        model = progress
    else:
        episodes = demonstration_episodes(progress) if hasattr(progress, "episode") else progress
        model = ProgressModel(seed=seed).pretrain(episodes)
    scorer = ProgressReward(
        model,
        dense_weight=dense_weight,
        calibrate=calibration is not None,
        update=update,
        calibration=calibration or "affine",
    )
    if fusion is None:
        fusion = RewardFusion("real" if world_model is None else "wmrl", seed=seed)
    make = env_fn if chunk_size is None else _Chunked(env_fn, chunk_size)
    return WorldModelVectorEnv(
        make,
        world_model if world_model is not None else RandomWorldModel(seed),
        num_groups,
        group_size,
        fusion=fusion,
        task="dynamics",
        progress_reward=scorer,
        **options,
    )


class _Chunked:
    """``env_fn``'s env taking action chunks of ``chunk_size``."""

    def __init__(self, env_fn: Callable[[], gym.Env], chunk_size: int) -> None:
        self.env_fn, self.chunk_size = env_fn, chunk_size

    def __call__(self) -> gym.Env:
        return ActionChunking(self.env_fn(), self.chunk_size)
