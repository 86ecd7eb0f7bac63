"""The fused advantage estimator, registered in verl's ``register_adv_est`` registry.

verl calls an advantage estimator with ``token_level_rewards`` (the reward of each sample on
its last response token), ``response_mask``, ``index`` (the samples' ``uid``) and ``config``;
a custom estimator never sees the rest of the batch (only verl's GDPO gets it). So
:class:`FusedAdvantageEstimator` finds each row's
:class:`~wmrl_env.integrations.verl.ledger.SampleRecord` by ``(uid, float32 reward)``, runs one
:meth:`RewardFusion.step <wmrl_env.fusion.RewardFusion.step>` on the whole batch and returns
the fused advantages broadcast over each response's tokens (and as the returns, like GRPO).

Rows that are left out of the fusion (advantage 0, outside every group baseline): failed
executions, and invalid world-model predictions of groups that were not anchors (a verl
worker sees one sample, so it cannot send the rest of that group to execution).

Row matching is exact whenever the rows of a group that share a reward value would get the
same advantage, which holds for every method but ``ppi`` (its anchor advantage also depends
on the row's world-model score): for ``ppi``, rows of one group with equal real scores and
different world-model scores may swap advantages; ``ambiguous_rows`` counts them.

It fails loudly when verl changes what it passes: a missing ``index``, or a row whose reward
matches no record (e.g. ``algorithm.use_kl_in_reward=True``, which edits the rewards first).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from wmrl_env.fusion import FusionOutput, RewardFusion
from wmrl_env.integrations.verl.ledger import Ledger, RayLedger, SampleRecord, default_ledger
from wmrl_env.integrations.verl.ledger import reward_key as _key
from wmrl_env.utils.imports import require

__all__ = ["FusedAdvantageEstimator", "VerlFusionCall", "register_estimator"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class VerlFusionCall:
    """One batch as the estimator saw it (kept as ``last_call``)."""

    uids: np.ndarray
    records: list[SampleRecord]
    included: np.ndarray
    advantages: np.ndarray
    fusion: FusionOutput | None
    metrics: dict[str, float]


class FusedAdvantageEstimator:
    """verl's advantage estimator over a :class:`RewardFusion`.

    Args:
        fusion: the fusion (its state carries across steps; ``state_dict()`` saves it).
        ledger: where the reward workers file their records; default
            :func:`~wmrl_env.integrations.verl.ledger.default_ledger` at the first call.
        log_metrics: receives ``{"wmrl/<name>": value}`` after every batch (verl's registry
            offers no path into its own metrics dict); default: the ``logging`` module, at
            WARNING while ``wmrl/hacking_alarm`` is 1.
    """

    def __init__(
        self,
        fusion: RewardFusion,
        ledger: Ledger | RayLedger | None = None,
        log_metrics: Callable[[dict[str, float]], None] | None = None,
    ) -> None:
        self.fusion = fusion
        self.ledger = ledger
        self.log_metrics = log_metrics or _log_metrics
        self.last_call: VerlFusionCall | None = None

    def __call__(
        self,
        token_level_rewards: Any,
        response_mask: Any,
        index: Any = None,
        config: Any = None,
        **_: Any,
    ) -> tuple[Any, Any]:
        torch = require("torch", "the verl integration")
        if index is None:
            raise ValueError(
                "the wmrl advantage estimator needs verl's `index` (the samples' uid); this "
                "verl version did not pass it"
            )
        uids = np.array([str(u) for u in index], dtype=object)
        keys = [_key(v) for v in token_level_rewards.sum(dim=-1).float().cpu().numpy()]
        if self.ledger is None:
            self.ledger = default_ledger()
        available = self.ledger.take(list(uids))
        records, ambiguous = _match(uids, keys, available, self.fusion.method)
        advantages, out, included = self._fuse(uids, records)
        metrics = _metrics(out, records, included, ambiguous)
        self.last_call = VerlFusionCall(uids, records, included, advantages, out, metrics)
        self.log_metrics(metrics)
        per_token = torch.as_tensor(advantages, dtype=token_level_rewards.dtype)
        per_token = per_token.to(response_mask.device).unsqueeze(-1) * response_mask
        return per_token, per_token

    def _fuse(
        self, uids: np.ndarray, records: list[SampleRecord]
    ) -> tuple[np.ndarray, FusionOutput | None, np.ndarray]:
        valid = np.array([r.wm_valid for r in records])
        anchor = np.array([r.is_anchor for r in records])
        failed = np.array([r.failed for r in records])
        included = valid | anchor
        advantages = np.zeros(len(records))
        if not included.any():
            return advantages, None, included
        rows = [r for r, keep in zip(records, included, strict=True) if keep]
        out = self.fusion.step(
            uids[included],
            np.array([r.wm_score if r.wm_valid else np.nan for r in rows]),
            np.array([r.real_score for r in rows]),
            failed=failed[included],
            wm_valid=valid[included],
            inclusion_probabilities=np.array([r.inclusion_probability for r in rows]),
        )
        advantages[included] = out.advantages
        return advantages, out, included

    def state_dict(self) -> dict[str, Any]:
        return {"fusion": self.fusion.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.fusion.load_state_dict(state["fusion"])


def _match(
    uids: np.ndarray, keys: list[str], available: dict[str, list[SampleRecord]], method: str
) -> tuple[list[SampleRecord], int]:
    """Each row's record, by uid and reward value; counts the rows whose record was one of
    several that are not interchangeable (see the module docstring)."""
    pools: dict[tuple[str, str], list[SampleRecord]] = {}
    for uid, records in available.items():
        for record in records:
            pools.setdefault((uid, record.key), []).append(record)
    ambiguous_pools = {
        key
        for key, pool in pools.items()
        if any(not pool[0].interchangeable(other, method) for other in pool[1:])
    }
    matched, ambiguous = [], 0
    for uid, key in zip(uids, keys, strict=True):
        pool = pools.get((uid, key))
        if not pool:
            raise LookupError(
                f"no wmrl record for a sample of group {uid!r} with reward {key}: every sample "
                "must be scored by WMRLRewardManager, and the rewards must reach the estimator "
                "unchanged (algorithm.use_kl_in_reward=False)"
            )
        matched.append(pool.pop(0))
        ambiguous += int((uid, key) in ambiguous_pools)
    return matched, ambiguous


def _metrics(
    out: FusionOutput | None, records: list[SampleRecord], included: np.ndarray, ambiguous: int
) -> dict[str, float]:
    metrics: dict[str, float] = {}
    if out is not None:
        for name, value in out.metrics.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                metrics[f"wmrl/{name}"] = float(value)
    metrics["wmrl/n_left_out"] = float((~included).sum())
    metrics["wmrl/wm_valid_fraction"] = float(np.mean([r.wm_valid for r in records]))
    metrics["wmrl/ambiguous_rows"] = float(ambiguous)
    return metrics


def _log_metrics(metrics: dict[str, float]) -> None:
    """INFO every batch; WARNING while the reward-hacking monitor's alarm is up."""
    line = " ".join(f"{k}={v:.4g}" for k, v in sorted(metrics.items()))
    if metrics.get("wmrl/hacking_alarm", 0.0) > 0:
        logger.warning("reward hacking? the anchor gap rises beyond its noise: %s", line)
    else:
        logger.info(line)


def register_estimator(
    name: str = "wmrl",
    fusion: RewardFusion | None = None,
    *,
    ledger: Ledger | RayLedger | None = None,
    log_metrics: Callable[[dict[str, float]], None] | None = None,
) -> FusedAdvantageEstimator:
    """Register a :class:`FusedAdvantageEstimator` as verl's ``algorithm.adv_estimator=name``.

    Registering the same name again returns the estimator already there (verl may import a
    user's module more than once per process), so the fusion's state is never reset.
    """
    core_algos = require("verl.trainer.ppo.core_algos", "the verl integration")
    existing = core_algos.ADV_ESTIMATOR_REGISTRY.get(name)
    if isinstance(existing, FusedAdvantageEstimator):
        return existing
    if existing is not None:
        raise ValueError(f"verl already has an advantage estimator named {name!r}: {existing}")
    estimator = FusedAdvantageEstimator(
        fusion if fusion is not None else RewardFusion(method="wmrl", seed=0), ledger, log_metrics
    )
    core_algos.register_adv_est(name)(estimator)
    return estimator
