"""Environments in another interpreter, driven from this one through a pipe.

LIBERO pins robosuite 1.4 and cannot share a Python environment with robosuite 1.5:
:class:`SubprocessEnv` runs it (or any gymnasium environment) in its own interpreter and
exposes it here as an ordinary gymnasium environment, snapshots included.
"""

from wmrl_env.envs.remote.env import RemoteEnvError, SubprocessEnv, WorkerDiedError, step_all

__all__ = ["RemoteEnvError", "SubprocessEnv", "WorkerDiedError", "step_all"]
