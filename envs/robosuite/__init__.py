"""robosuite manipulation tasks as gymnasium environments (extra ``robosuite``).

Importing this module registers ``wmrl/Lift-v0``, ``wmrl/Stack-v0`` and ``wmrl/Door-v0``
(robosuite itself is imported only when an environment is made).

Example:
    >>> import gymnasium as gym
    >>> import wmrl_env.envs.robosuite
    >>> gym.spec("wmrl/Lift-v0").kwargs
    {'task': 'Lift'}
"""

from __future__ import annotations

import gymnasium as gym

from wmrl_env.envs.robosuite.env import RobosuiteEnv
from wmrl_env.envs.robosuite.snapshot import restore_snapshot, take_snapshot

__all__ = ["TASKS", "RobosuiteEnv", "restore_snapshot", "take_snapshot"]

#: robosuite tasks registered as ``wmrl/<task>-v0``
TASKS = ("Lift", "Stack", "Door")

for _task in TASKS:
    if f"wmrl/{_task}-v0" not in gym.registry:
        gym.register(
            f"wmrl/{_task}-v0",
            entry_point="wmrl_env.envs.robosuite.env:RobosuiteEnv",
            kwargs={"task": _task},
        )
