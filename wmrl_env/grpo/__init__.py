"""GRPO for torch policies on a :class:`~wmrl_env.WorldModelVectorEnv` (needs the torch extra).

Example:
    >>> from wmrl_env.grpo import GRPOConfig
    >>> GRPOConfig(iterations=10).clip_coef
    0.2
"""

from wmrl_env.grpo.loop import GRPOConfig, Rollout, collect_rollout, grpo_loss, train
from wmrl_env.grpo.policies import (
    CategoricalPolicy,
    GaussianPolicy,
    Policy,
    make_encoder,
    make_policy,
)

__all__ = [
    "CategoricalPolicy",
    "GRPOConfig",
    "GaussianPolicy",
    "Policy",
    "Rollout",
    "collect_rollout",
    "grpo_loss",
    "make_encoder",
    "make_policy",
    "train",
]
