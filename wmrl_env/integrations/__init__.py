"""Adapters to other RL libraries; each imports its library only when used (an extra).

Import each by its module: :mod:`wmrl_env.integrations.sb3` (``SB3VecEnv``),
:mod:`wmrl_env.integrations.trl` (``WMRLGRPOTrainer``, reward functions),
:mod:`wmrl_env.integrations.vla` (VLA policies on robot envs) and
:mod:`wmrl_env.integrations.verl`. Nothing is exported here, so that using one integration
never loads another.
"""

__all__: list[str] = []
