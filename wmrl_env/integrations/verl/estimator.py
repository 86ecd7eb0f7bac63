"""The fused advantage estimator, registered in verl's ``register_adv_est`` registry.

verl calls an advantage estimator with ``token_level_rewards`` (the reward of each sample on
its last response token), ``response_mask``, ``index`` (the samples' ``uid``) and ``config``;
a custom estimator never sees the rest of the batch (only verl's GDPO gets it). So
:class:`FusedAdvantageEstimator` finds each row's
:class:`~wmrl_env.integrations.verl.ledger.SampleRecord` by the row's **sample key**, which the
:mod:`~wmrl_env.integrations.verl.patch` point hands it (verl's own row keys in the v1
trainer, the ``wmrl_key`` column in the legacy one), runs one
:meth:`RewardFusion.step <wmrl_env.fusion.RewardFusion.step>` on the whole batch and returns
the fused advantages broadcast over each response's tokens (and as the returns, like GRPO).
A second call on the same batch (same rows, keys and rewards: a retry) returns the same
advantages without stepping the fusion again.
Matching by key makes the reward value irrelevant: reward shaping (an overlong penalty, a
format bonus, ``use_kl_in_reward``), a bf16 or float64 reward tensor and a retry of the same
batch all work. Whatever verl added to a row's reward on top of the manager's
``reward_score`` (the shaping) joins the fused advantage as a group-centred term, as GRPO
would treat it: ``A = A_fused + (d - mean_group(d))``, ``d`` the row's reward sum minus its
``reward_score`` (0 where that was NaN).

Without the patch (an estimator called directly), rows are matched by ``(uid, float32
reward)`` as a fallback: exact whenever the rows of a group that share a reward value would
get the same advantage, which holds for every method but ``ppi``; ``ambiguous_rows`` counts
the others; any edit of the reward raises ``LookupError``.

Rows that are left out of the fusion (advantage 0, outside every group baseline): invalid
world-model predictions of groups that were not anchors whose outcome is unknown (the reward
manager executed them alone and the infrastructure failed). Executions whose infrastructure
failed are in the fusion as ``failed`` (advantage 0). A known outcome (a program known to
fail, or one executed alone because its prediction was invalid) goes to the fusion as a
``known_scores`` entry: that row's reward, no evidence. The records' world-model std and
task (``cluster``) reach the fusion's gate.

It fails loudly when verl changes what it passes: a missing ``index``, a row with no record,
or a sample key repeated in one batch (multi-output agent loops: one record per sample).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from wmrl_env.fusion import FusionOutput, RewardFusion
from wmrl_env.integrations._shared import flatten_metrics
from wmrl_env.integrations.verl.ledger import Ledger, RayLedger, SampleRecord, default_ledger
from wmrl_env.integrations.verl.ledger import reward_key as _key
from wmrl_env.integrations.verl.patch import current_row_keys, patch_compute_advantage
from wmrl_env.rounds import AnchoredRound, FinishedRound, RealRecord
from wmrl_env.utils.imports import require
from wmrl_env.world_models.base import Prediction

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
        self.engine = AnchoredRound(fusion, max_infrastructure_failures=0)  # workers' breaker
        self.ledger = ledger
        self.log_metrics = log_metrics or _log_metrics
        self.last_call: VerlFusionCall | None = None
        self._last_signature: tuple | None = None

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
        row_keys = current_row_keys()
        rewards = token_level_rewards.sum(dim=-1).double().cpu().numpy()
        signature = (tuple(uids), None if row_keys is None else tuple(row_keys), rewards.tobytes())
        if self._last_signature == signature:  # a retry of the last batch: same answer, no step
            advantages = self.last_call.advantages
        else:
            advantages = self._advantages(uids, row_keys, rewards, token_level_rewards.dtype)
            self._last_signature = signature
        per_token = torch.as_tensor(advantages, dtype=token_level_rewards.dtype)
        per_token = per_token.to(response_mask.device).unsqueeze(-1) * response_mask
        return per_token, per_token

    def _advantages(
        self, uids: np.ndarray, row_keys: list[str] | None, rewards: np.ndarray, dtype: Any
    ) -> np.ndarray:
        torch = require("torch", "the verl integration")
        if self.ledger is None:
            self.ledger = default_ledger()
        available = self.ledger.take(list(uids))
        shaping = np.zeros(len(uids))
        if row_keys is not None and len(row_keys) == len(uids):
            records, ambiguous = _match_by_key(uids, row_keys, available), 0
            eps = float(torch.finfo(dtype).eps)
            shaping = _shaping(rewards, records, eps)
        else:
            keys = [_key(v) for v in rewards]
            records, ambiguous = _match(uids, keys, available, self.fusion.method)
        advantages, finished, included = self._fuse(uids, records)
        out = None if finished is None else finished.fusion
        scored = np.array([np.isfinite(r.reward) for r in records], dtype=bool)
        advantages[scored] += _group_centred(shaping[scored], uids[scored])
        metrics = _metrics(finished, records, included, ambiguous)
        metrics["wmrl/shaping_abs_mean"] = float(np.abs(shaping).mean())
        evaluation = self.ledger.take_eval()
        if evaluation is not None:
            metrics.update(evaluation.metrics())
        self.last_call = VerlFusionCall(uids, records, included, advantages, out, metrics)
        self.log_metrics(metrics)
        return advantages

    def _fuse(
        self, uids: np.ndarray, records: list[SampleRecord]
    ) -> tuple[np.ndarray, FinishedRound | None, np.ndarray]:
        valid = np.array([r.wm_valid for r in records])
        anchor = np.array([r.is_anchor for r in records])
        known = np.array([r.known_score for r in records], dtype=np.float64)
        included = valid | anchor | ~np.isnan(known)
        advantages = np.zeros(len(records))
        if not included.any():
            return advantages, None, included
        rows = [r for r, keep in zip(records, included, strict=True) if keep]
        std = np.array([r.wm_std for r in rows])
        has_std = bool(np.isfinite(std[valid[included]]).all()) and valid[included].any()
        # each sample's fate was decided by its reward worker (rounds.sample_outcome): the
        # round's plan is taken as decided, with each anchor's own inclusion probability
        drawn = anchor[included]
        evidence = drawn & np.isnan(known[included])
        plan = self.engine.plan_from(
            uids[included],
            drawn,
            evidence,
            np.array([r.inclusion_probability for r in rows]),
            known[included],
        )
        record = RealRecord.of(
            np.array([r.real_score for r in rows]),
            np.array([r.failed for r in rows]),
            np.array([r.program_failed for r in rows]),
            np.array([r.executed for r in rows]),
        )
        prediction = Prediction(
            np.array([r.wm_score if r.wm_valid else np.nan for r in rows]),
            std if has_std else None,
            valid[included],
        )
        clusters = [r.cluster or f"uid\x00{r.uid}" for r in rows]
        finished = self.engine.finish(plan, record, prediction, clusters)
        advantages[included] = finished.fusion.advantages
        return advantages, finished, included

    def state_dict(self) -> dict[str, Any]:
        return {"fusion": self.fusion.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.fusion.load_state_dict(state["fusion"])


def _shaping(rewards: np.ndarray, records: list[SampleRecord], eps: float) -> np.ndarray:
    """What verl added to each row's reward beyond the manager's ``reward_score``: 0 where
    that was NaN, and 0 within the reward tensor's rounding (``eps``: its dtype's)."""
    returned = np.array([r.reward for r in records], dtype=np.float64)
    shaping = np.where(np.isfinite(returned), rewards - returned, 0.0)
    shaping[~np.isfinite(shaping)] = 0.0
    rounding = 4 * max(eps, float(np.finfo(np.float32).eps)) * np.maximum(1.0, np.abs(rewards))
    shaping[np.abs(shaping) <= rounding] = 0.0
    return shaping


def _group_centred(values: np.ndarray, uids: np.ndarray) -> np.ndarray:
    out = np.zeros_like(values)
    for uid in np.unique(uids):
        members = uids == uid
        out[members] = values[members] - values[members].mean()
    return out


def _match_by_key(
    uids: np.ndarray, row_keys: list[str], available: dict[str, list[SampleRecord]]
) -> list[SampleRecord]:
    """Each row's record by its sample key (module docstring)."""
    by_key = {record.key: record for records in available.values() for record in records}
    if len(set(row_keys)) != len(row_keys):
        repeated = next(k for k in row_keys if row_keys.count(k) > 1)
        raise ValueError(
            f"sample key {repeated!r} is on several rows of one batch: the wmrl estimator takes "
            "one output per sample (multi-output agent loops are not supported, docs/verl.md)"
        )
    matched = []
    for uid, key in zip(uids, row_keys, strict=True):
        record = by_key.get(key)
        if record is None or record.uid != uid:
            raise LookupError(
                f"no wmrl record for the sample {key!r} of group {uid!r}: every sample must be "
                "scored by WMRLRewardManager before its batch reaches the advantage step"
            )
        matched.append(record)
    return matched


def _match(
    uids: np.ndarray, keys: list[str], available: dict[str, list[SampleRecord]], method: str
) -> tuple[list[SampleRecord], int]:
    """Each row's record, by uid and reward value; counts the rows whose record was one of
    several that are not interchangeable (see the module docstring)."""
    pools: dict[tuple[str, str], list[SampleRecord]] = {}
    for uid, records in available.items():
        for record in records:
            pools.setdefault((uid, record.reward_key), []).append(record)
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
                "must be scored by WMRLRewardManager, and without the row keys of "
                "patch_compute_advantage() (applied by register_estimator) the rewards must "
                "reach the estimator unchanged (no shaping, algorithm.use_kl_in_reward=False)"
            )
        matched.append(pool.pop(0))
        ambiguous += int((uid, key) in ambiguous_pools)
    return matched, ambiguous


def _metrics(
    finished: FinishedRound | None,
    records: list[SampleRecord],
    included: np.ndarray,
    ambiguous: int,
) -> dict[str, float]:
    metrics = flatten_metrics(finished.metrics) if finished is not None else {}
    # the round's metrics as every adapter names them (wmrl_env.rounds.ROUND_METRICS), counted
    # over every row, those left out of the fusion included; a group run for real without
    # being drawn is forced (an invalid prediction outside the draw runs alone, its outcome
    # known); verl screens none
    metrics["wmrl/n_executed"] = float(sum(r.executed for r in records))
    metrics["wmrl/n_forced_anchor_groups"] = float(
        len({r.uid for r in records if r.executed and not r.is_anchor})
    )
    metrics["wmrl/n_screened"] = 0.0
    metrics["wmrl/n_program_failures"] = float(sum(r.program_failed for r in records))
    metrics["wmrl/n_infrastructure_failures"] = float(sum(r.failed for r in records))
    metrics["wmrl/n_left_out"] = float((~included).sum())
    metrics["wmrl/wm_valid_fraction"] = float(np.mean([r.wm_valid for r in records]))
    metrics["wmrl/ambiguous_rows"] = float(ambiguous)
    return metrics


def _log_metrics(metrics: dict[str, float]) -> None:
    """INFO every batch; WARNING while the reward-hacking monitor's alarm (training anchors,
    or the last validation's real sample) is up."""
    line = " ".join(f"{k}={v:.4g}" for k, v in sorted(metrics.items()))
    alarms = ("wmrl/hacking_alarm", "wmrl/eval_hacking_alarm")
    if any(metrics.get(name, 0.0) > 0 for name in alarms):
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
    """Register a :class:`FusedAdvantageEstimator` as verl's ``algorithm.adv_estimator=name``
    and apply :func:`~wmrl_env.integrations.verl.patch.patch_compute_advantage`.

    Registering the same name again returns the estimator already there (verl may import a
    user's module more than once per process), so the fusion's state is never reset.
    """
    core_algos = require("verl.trainer.ppo.core_algos", "the verl integration")
    patch_compute_advantage()
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
