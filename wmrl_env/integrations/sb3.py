"""Stable-Baselines3 adapter: a :class:`~wmrl_env.WorldModelVectorEnv` as an SB3 ``VecEnv``.

SB3's vector contract differs from gymnasium's: ``reset()`` returns observations only,
``step_wait()`` returns ``(obs, rewards, dones, infos)`` with one info dict per env, and an env
that is done is reset at once, its last observation kept in ``info["terminal_observation"]``.
This module is the one place that converts; nothing of SB3's contract leaks elsewhere.

A round (one GRPO batch) is the unit the world-model env resets, so the adapter reports
``done`` for every env when the round ends and then starts the next round. In outcome tasks
every round is one step, the ordinary case. In multi-step tasks an env whose episode ended
before the others waits in an absorbing state (same observation, reward 0, its actions
ignored) until the round ends, when every env receives its fused trajectory reward.

What PPO receives (``rewards=``):

* ``"weighted"`` (default): ``l_g + w_g * (x - mean_g x)``, the fused reward ``x``'s deviation
  from its group's mean, scaled by the fusion weight ``w_g``, around the group's **level**
  ``l_g``. A group's members share their start, so PPO's critic learns ``V(start) = l_g`` and
  PPO's advantage ``reward - V`` becomes ``w_g * (x - mean_g x)``: the inverse-variance
  weights of ``denoise`` and ``wmrl`` reach PPO's loss (up to the critic's error and PPO's
  per-minibatch advantage normalisation, which rescales every weight alike).
* ``"fused"``: ``l_g + (x - mean_g x)``; the weights are dropped, so ``denoise`` and
  ``wmrl`` train like ``debias`` (``info["weight"]`` still reports them).

The level is what a critic can learn: the group's mean fused reward, except for the gated
methods, whose fused rewards are built for group-centred advantages, not for a critic.
Under ``wmrl`` a world-model group's level is its mean calibrated score ``mean_g f`` (the
fused reward's ``lam * f`` would put it near 0 while the gate is shut); under ``ppi`` an
anchor group's rectified reward ``r / pi - lam (1 / pi - 1) f`` swings by ``1 / pi`` with
the draw, so its rewards are centred per group and put at the level of its real scores
``mean_g r`` (world-model groups at ``mean_g f``). The deviations, and so PPO's advantages,
are the fusion's own. For every other method ``l_g = mean_g x`` and the rewards are exactly
``x`` where ``w_g == 1``.

Failed real executions have a NaN fused reward; SB3 cannot learn from NaN, so the adapter
hands out ``failed_reward`` instead (``info["exec_status"]`` says what happened) and leaves
them out of ``b_g``.

``episode_returns="real"`` puts SB3's episode statistics (``info["episode"]``, which SB3 logs
as ``rollout/ep_rew_mean``) on the real returns of anchor episodes only; ``"fused"`` on every
episode's fused reward; ``None`` (default) reports none.

Example:
    >>> import gymnasium as gym
    >>> import numpy as np
    >>> from wmrl_env import RewardFusion, WorldModelVectorEnv
    >>> class Bandit(gym.Env):
    ...     observation_space, action_space = gym.spaces.Discrete(3), gym.spaces.Discrete(3)
    ...     def reset(self, *, seed=None, options=None):
    ...         super().reset(seed=seed)
    ...         self.task = int(self.np_random.integers(3))
    ...         return self.task, {}
    ...     def step(self, action):
    ...         return self.task, float(action == self.task), True, False, {}
    >>> class Guess:
    ...     def predict(self, contexts, actions):
    ...         return 0.9 * (np.asarray(contexts) == np.asarray(actions))
    >>> envs = SB3VecEnv(WorldModelVectorEnv(Bandit, Guess(), num_groups=2, group_size=2,
    ...                                      fusion=RewardFusion(seed=0), executor="inline"))
    >>> obs = envs.reset()
    >>> obs, rewards, dones, infos = envs.step(np.zeros(4, dtype=np.int64))
    >>> dones.tolist(), "advantage" in infos[0], "terminal_observation" in infos[0]
    ([True, True, True, True], True, True)
    >>> envs.close()
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from wmrl_env.fusion.reward_fusion import GATED_METHODS
from wmrl_env.utils.imports import require
from wmrl_env.wrappers.vector import WorldModelVectorEnv

vec_env = require("stable_baselines3.common.vec_env", "the Stable-Baselines3 adapter")

__all__ = ["SB3VecEnv", "critic_levels", "per_env_infos", "weighted_rewards"]

REWARDS = ("weighted", "fused")
EPISODE_RETURNS = (None, "real", "fused")


def weighted_rewards(
    fused: np.ndarray,
    weights: np.ndarray,
    group_ids: np.ndarray,
    levels: np.ndarray | None = None,
) -> np.ndarray:
    """``l_g + w * (x - mean_g x)`` per trajectory, ``l_g`` the group's level (default its
    mean fused reward ``mean_g x``). NaN, a failed execution, stays NaN and out of the means.

    >>> weighted_rewards(np.array([0.0, 1.0, 0.5, 0.5]), np.array([2.0, 2.0, 1.0, 1.0]),
    ...                  np.array([0, 0, 1, 1])).tolist()
    [-0.5, 1.5, 0.5, 0.5]
    >>> weighted_rewards(np.array([0.0, 0.2]), np.ones(2), np.array([0, 0]),
    ...                  levels=np.array([0.6, 0.6])).tolist()
    [0.5, 0.7]
    """
    fused = np.asarray(fused, dtype=np.float64)
    weights = np.asarray(weights, dtype=np.float64)
    out = fused.copy()
    for group in np.unique(group_ids):
        members = (group_ids == group) & ~np.isnan(fused)
        if not members.any():
            continue
        mean = fused[members].mean()
        level = mean if levels is None else float(np.nanmean(levels[members]))
        if not np.isfinite(level):
            level = mean
        out[members] = level + weights[members] * (fused[members] - mean)
    return out


def critic_levels(
    method: str,
    is_anchor: np.ndarray,
    calibrated: np.ndarray,
    real: np.ndarray,
    fused: np.ndarray,
) -> np.ndarray:
    """Per trajectory, the value its group's reward level should have for a critic (module
    docstring): the calibrated score on world-model groups and the real score on anchor
    groups under ``ppi``, the calibrated score on world-model groups under ``wmrl``, the
    fused reward otherwise (averaged per group by :func:`weighted_rewards`).

    >>> critic_levels("wmrl", np.array([True, False]), np.array([0.3, 0.6]),
    ...               np.array([1.0, np.nan]), np.array([1.0, 0.0])).tolist()
    [1.0, 0.6]
    """
    levels = np.asarray(fused, dtype=np.float64).copy()
    if method in GATED_METHODS:
        world_model = ~np.asarray(is_anchor, dtype=bool)
        levels[world_model] = np.asarray(calibrated, dtype=np.float64)[world_model]
    if method == "ppi":
        anchors = np.asarray(is_anchor, dtype=bool)
        levels[anchors] = np.asarray(real, dtype=np.float64)[anchors]
    return levels


_SB3_SPACES = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary, spaces.Dict)


def per_env_infos(info: dict[str, Any], num_envs: int) -> list[dict[str, Any]]:
    """Gymnasium's vector info (arrays + ``_key`` masks) as one dict per env."""
    infos: list[dict[str, Any]] = [{} for _ in range(num_envs)]
    for key, value in info.items():
        if key.startswith("_"):
            continue
        mask = info.get(f"_{key}", np.ones(num_envs, dtype=bool))
        per_env = per_env_infos(value, num_envs) if isinstance(value, dict) else value
        for i in np.flatnonzero(mask):
            infos[i][key] = per_env[i]
    return infos


class SB3VecEnv(vec_env.VecEnv):
    """Stable-Baselines3 ``VecEnv`` view of a :class:`WorldModelVectorEnv`.

    Args:
        envs: the world-model vector env (closed with this adapter).
        failed_reward: reward for a failed real execution (SB3 cannot take NaN).
        rewards: ``"weighted"`` (the fusion weights reach PPO's advantages) or ``"fused"``,
            both at the level a critic can learn (module docstring).
        episode_returns: what SB3's episode statistics report: ``"real"`` (anchor episodes'
            real returns), ``"fused"`` or ``None``.
    """

    def __init__(
        self,
        envs: WorldModelVectorEnv,
        failed_reward: float = 0.0,
        rewards: str = "weighted",
        episode_returns: str | None = None,
    ) -> None:
        if rewards not in REWARDS:
            raise ValueError(f"rewards must be one of {REWARDS}, got {rewards!r}")
        if episode_returns not in EPISODE_RETURNS:
            raise ValueError(
                f"episode_returns must be one of {EPISODE_RETURNS}, got {episode_returns!r}"
            )
        space = envs.single_observation_space
        if not isinstance(space, _SB3_SPACES):
            raise ValueError(
                f"Stable-Baselines3 cannot take {type(space).__name__} observations; encode them "
                "into a Box (e.g. with a gymnasium ObservationWrapper in env_fn)"
            )
        if not np.isfinite(failed_reward):
            raise ValueError(f"failed_reward must be a finite number, got {failed_reward}")
        self.envs = envs
        self.failed_reward = float(failed_reward)
        self.rewards = rewards
        self.episode_returns = episode_returns
        self.group_ids = np.arange(envs.num_envs) // envs.group_size
        self._actions: np.ndarray | None = None
        self._steps = np.zeros(envs.num_envs, dtype=np.int64)
        super().__init__(envs.num_envs, space, envs.single_action_space)

    def reset(self) -> Any:
        seed = self._seeds[0]
        observations, info = self.envs.reset(seed=seed, options=self._options[0] or None)
        self._steps[:] = 0
        self.reset_infos = per_env_infos(info, self.num_envs)
        self._reset_seeds()
        self._reset_options()
        return observations

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self) -> tuple[Any, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        if self._actions is None:
            raise RuntimeError("step_wait() without step_async()")
        observations, rewards, terminated, truncated, info = self.envs.step(self._actions)
        self._actions = None
        round_done = bool(np.all(terminated | truncated))
        if round_done and "fused_reward" in info:
            rewards = np.where(np.isnan(info["fused_reward"]), rewards, self._critic_rewards(info))
        rewards = np.where(np.isnan(rewards), self.failed_reward, rewards).astype(np.float32)
        self._steps += 1
        infos = per_env_infos(info, self.num_envs)
        if round_done:
            for i, env_info in enumerate(infos):
                env_info["terminal_observation"] = _item(observations, i)
                env_info["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
                self._episode_statistics(env_info, i)
            observations = self.reset()
        dones = np.full(self.num_envs, round_done)
        return observations, rewards, dones, infos

    def _critic_rewards(self, info: dict[str, Any]) -> np.ndarray:
        fused = info["fused_reward"]
        levels = critic_levels(
            self.envs.fusion.method,
            info["is_anchor"],
            info["calibrated_score"],
            info["real_score"],
            fused,
        )
        weights = info["weight"] if self.rewards == "weighted" else np.ones_like(fused)
        return weighted_rewards(fused, weights, self.group_ids, levels)

    def _episode_statistics(self, env_info: dict[str, Any], index: int) -> None:
        """SB3's ``info["episode"]`` for the env's episode, by ``episode_returns``."""
        if self.episode_returns == "real":
            value = env_info.get("real_score", np.nan) if env_info.get("is_anchor") else np.nan
        elif self.episode_returns == "fused":
            value = env_info.get("fused_reward", np.nan)
        else:
            return
        if np.isfinite(value):
            env_info["episode"] = {"r": float(value), "l": int(self._steps[index]), "t": 0.0}

    def close(self) -> None:
        self.envs.close()

    def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
        value = getattr(self.envs, attr_name)
        return [value for _ in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
        raise AttributeError(
            f"cannot set {attr_name!r}: the real envs of a WorldModelVectorEnv live in its executor"
        )

    def env_method(
        self, method_name: str, *method_args: Any, indices: Any = None, **method_kwargs: Any
    ) -> list[Any]:
        raise AttributeError(
            f"cannot call {method_name!r} on sub-envs: the real envs of a WorldModelVectorEnv "
            "live in its executor"
        )

    def env_is_wrapped(self, wrapper_class: type, indices: Any = None) -> list[bool]:
        return [False for _ in self._get_indices(indices)]


def _item(observations: Any, index: int) -> Any:
    if isinstance(observations, dict):
        return {key: value[index] for key, value in observations.items()}
    return observations[index]
