"""Env executors: play episodes (:class:`EnvJob`) in real gymnasium envs, as an Executor.

:class:`GymEnvExecutor` is what the wrappers use to pay for real steps: inline, in a thread
pool, or in worker processes that each hold their own envs (:mod:`.workers`). :mod:`.play`
holds what every backend shares (the job type, playing one job), :mod:`.pool` the live envs
(reused job after job, at most ``max_envs``), :mod:`.child` the mechanism behind every env
that runs in a child process (these workers, and ``wmrl_env.envs.remote.SubprocessEnv``).

Example:
    >>> import gymnasium as gym
    >>> with GymEnvExecutor(lambda: gym.make("CartPole-v1"), backend="inline") as executor:
    ...     (result,) = executor.run([EnvJob(actions=(0, 1), seed=0)])
    >>> result.ok, result.score
    (True, 2.0)
"""

from wmrl_env.env_executors.gym_env import BACKENDS, GymEnvExecutor
from wmrl_env.env_executors.play import (
    REPORTED_SECONDS,
    EnvDescription,
    EnvJob,
    SupportsSnapshots,
    supports_snapshots,
)

__all__ = [
    "BACKENDS",
    "REPORTED_SECONDS",
    "EnvDescription",
    "EnvJob",
    "GymEnvExecutor",
    "SupportsSnapshots",
    "supports_snapshots",
]
