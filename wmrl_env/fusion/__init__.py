"""The reward-fusion core: anchors, online debiasing, inverse-variance denoising, PPI.

Pure numpy/scipy: no torch, gymnasium or backend imports, so it can run anywhere.
"""

from wmrl_env.fusion.advantages import group_advantages
from wmrl_env.fusion.anchors import (
    inclusion_probabilities,
    select_anchor_groups,
    ucb_priorities,
    uncertainty_priorities,
)
from wmrl_env.fusion.calibration import CalibrationMap, CalibrationUpdate, OnlineCalibrator
from wmrl_env.fusion.cluster_gate import ClusterGates
from wmrl_env.fusion.gate import WorldModelGate
from wmrl_env.fusion.groups import GroupIndex
from wmrl_env.fusion.kappa import KappaEstimator, fusion_weights
from wmrl_env.fusion.monitor import GapMonitor, RewardHackingWarning
from wmrl_env.fusion.outputs import AnchorFit, FusionOutput
from wmrl_env.fusion.ppi import power_tuned_lambda, rectified_rewards
from wmrl_env.fusion.reward_fusion import METHODS, RewardFusion
from wmrl_env.fusion.screening import SCREENINGS, screen_members

__all__ = [
    "METHODS",
    "SCREENINGS",
    "AnchorFit",
    "CalibrationMap",
    "CalibrationUpdate",
    "ClusterGates",
    "FusionOutput",
    "GapMonitor",
    "GroupIndex",
    "KappaEstimator",
    "OnlineCalibrator",
    "RewardFusion",
    "RewardHackingWarning",
    "WorldModelGate",
    "fusion_weights",
    "group_advantages",
    "inclusion_probabilities",
    "power_tuned_lambda",
    "rectified_rewards",
    "screen_members",
    "select_anchor_groups",
    "ucb_priorities",
    "uncertainty_priorities",
]
