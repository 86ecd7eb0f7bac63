"""Robot policies worth post-training: scripted-expert demonstrations and behaviour cloning.

* :mod:`.demonstrations`: :func:`collect_demonstrations` -> :class:`Demonstrations` (per-step
  arrays from exact seeded starts; ``.npz`` save / load);
* :mod:`.behaviour_cloning`: :func:`train_bc_policy` -> a GRPO-ready
  :class:`~wmrl_env.integrations.vla.ChunkedGaussianPolicy`; :func:`save_policy` /
  :func:`load_policy`;
* :mod:`.evaluation`: :func:`success_on_seeds`, greedy or sampled;
* :mod:`.base_policy`: :func:`make_base_policy`, all of it in one call with per-task recipes;
* :mod:`.progress`: :class:`ProgressModel`, task progress and its std from the state, and
  :mod:`.dense_reward`: :class:`DenseProgressReward`, the dense progress reward fused with the
  sparse success inside each real env (:class:`ProgressReward` shared by a run's envs);
  :func:`sampled_groups` plays a policy's sampled episodes and keeps their states.

The scripted experts live beside the environments (:mod:`wmrl_env.envs.robosuite.experts`).
torch and robosuite are imported only when a function needs them.

Example:
    >>> from wmrl_env.robotics import RECIPES
    >>> RECIPES["Lift"].chunk_size
    8
"""

from wmrl_env.robotics.base_policy import HELD_OUT_SEED, RECIPES, BasePolicyRecipe, make_base_policy
from wmrl_env.robotics.behaviour_cloning import (
    action_chunks,
    fit_chunk_predictor,
    load_policy,
    save_policy,
    train_bc_policy,
)
from wmrl_env.robotics.demonstrations import Demonstrations, collect_demonstrations
from wmrl_env.robotics.dense_reward import DenseProgressReward, ProgressReward
from wmrl_env.robotics.episodes import sampled_groups
from wmrl_env.robotics.evaluation import success_on_seeds
from wmrl_env.robotics.progress import ProgressModel, demonstration_episodes

__all__ = [
    "HELD_OUT_SEED",
    "RECIPES",
    "BasePolicyRecipe",
    "Demonstrations",
    "DenseProgressReward",
    "ProgressModel",
    "ProgressReward",
    "action_chunks",
    "collect_demonstrations",
    "demonstration_episodes",
    "fit_chunk_predictor",
    "load_policy",
    "make_base_policy",
    "sampled_groups",
    "save_policy",
    "success_on_seeds",
    "train_bc_policy",
]
