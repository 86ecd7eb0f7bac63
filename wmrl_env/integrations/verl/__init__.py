"""verl integration: world-model rewards with real anchor groups, fused per batch.

Two pieces plug into verl's own registries (no patch of verl's source):

* :class:`WMRLRewardManager` (``reward.reward_manager``): per sample, the world model's score,
  and for anchor groups a real execution started alongside it;
* :func:`register_estimator` (``algorithm.adv_estimator``): per batch, one
  :class:`~wmrl_env.fusion.RewardFusion` step whose advantages verl's policy loss receives.

They meet in a :mod:`ledger <wmrl_env.integrations.verl.ledger>` of per-sample records, found
by each sample's key, which :func:`patch_compute_advantage` (the one patch point, applied by
:func:`register_estimator`) hands the estimator.
docs/verl.md has the config overrides and exactly what verl does to the advantages.
Only :class:`WMRLRewardManager` imports verl (on first access); the rest needs numpy alone.
"""

from typing import Any

from wmrl_env.integrations.verl.estimator import (
    FusedAdvantageEstimator,
    VerlFusionCall,
    register_estimator,
)
from wmrl_env.integrations.verl.ledger import Ledger, RayLedger, SampleRecord, anchor_draw
from wmrl_env.integrations.verl.patch import patch_compute_advantage

__all__ = [
    "FusedAdvantageEstimator",
    "Ledger",
    "RayLedger",
    "SampleRecord",
    "VerlFusionCall",
    "WMRLRewardManager",
    "anchor_draw",
    "patch_compute_advantage",
    "register_estimator",
]


def __getattr__(name: str) -> Any:
    if name == "WMRLRewardManager":  # subclasses verl's RewardManagerBase: needs verl
        from wmrl_env.integrations.verl.reward_manager import WMRLRewardManager

        return WMRLRewardManager
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
