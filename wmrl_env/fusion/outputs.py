"""What a fusion step returns: the fused batch, what the anchors taught, and the metrics."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from wmrl_env.fusion.calibration import CalibrationUpdate
from wmrl_env.fusion.gate import WorldModelGate
from wmrl_env.fusion.kappa import KappaEstimator
from wmrl_env.fusion.monitor import GapReading
from wmrl_env.fusion.validation import Batch


@dataclass(frozen=True)
class FusionOutput:
    """The result of one :meth:`RewardFusion.step`; arrays have one entry per trajectory.

    Attributes:
        rewards: the fused reward ``x`` (NaN for failed executions).
        advantages: group-centred, scaled ``x``, multiplied by ``weights`` (0 when failed).
        weights: positive fusion weights with mean 1, already folded into ``advantages``.
        calibrated: the calibrated world-model score ``f(s)`` (NaN where ``s`` is invalid).
        is_anchor: whether the trajectory's group was executed for real.
        inclusion: the inclusion probability of each anchor's group (NaN elsewhere).
        kappa: the smoothed variance ratio in use.
        metrics: diagnostics for logging (see :func:`step_metrics`).
    """

    rewards: np.ndarray
    advantages: np.ndarray
    weights: np.ndarray
    calibrated: np.ndarray
    is_anchor: np.ndarray
    inclusion: np.ndarray
    kappa: float
    metrics: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AnchorFit:
    """What :meth:`RewardFusion.observe_anchors` learnt from one step's anchor pairs.

    Attributes:
        update: the calibrator's update (``None`` for a fusion that does not calibrate).
        cross_fitted: per pair, ``f_{-fold}(s)`` (NaN where no out-of-sample map existed).
        known: per pair, whether ``cross_fitted`` is known.
        variances: pooled ``(sigma2_e, sigma2_r, dof)`` of the known pairs.
        gap: mean ``cross_fitted - real`` over the known pairs (NaN when none).
        monitor: the reward-hacking monitor's reading after this gap.
    """

    update: CalibrationUpdate | None
    cross_fitted: np.ndarray
    known: np.ndarray
    variances: tuple[float, float, int]
    gap: float
    monitor: GapReading


def step_metrics(
    batch: Batch,
    fit: AnchorFit | None,
    residuals: np.ndarray,
    rewards: np.ndarray,
    lam: float | np.ndarray,
    step: int,
    kappa: KappaEstimator,
    gate: WorldModelGate,
) -> dict[str, Any]:
    """The diagnostics of one :meth:`~wmrl_env.fusion.RewardFusion.step`
    (``FusionOutput.metrics``).

    Keys: ``n_groups``, ``n_anchor_groups``, ``n_anchor_trajectories``,
    ``n_failed``, ``n_wm_invalid``, ``n_pairs`` (calibration window), ``spearman``
    (window), ``calibration_fallback`` and ``calibration_reason``, ``residual_mse``
    (cross-fitted, this step's anchors), ``residual_var``/``real_var`` (within-group),
    ``kappa``, ``kappa_raw``, ``wm_weight`` (the world model's weight ``lam`` used this
    step; with a per-cluster gate, the mean over the step's samples),
    ``wm_weight_estimate`` / ``wm_weight_se`` (the pooled slope behind the next
    one), ``anchor_gap`` (mean cross-fitted calibrated minus real score on anchors:
    positive means the world model over-scores), ``anchor_gap_trend`` /
    ``anchor_gap_trend_t`` (its slope per step over the monitor's window and t statistic),
    ``hacking_alarm`` (1 while the gap trends upward beyond its noise) and
    ``reward_mean``.
    """
    anchor_groups = int(batch.groups.count(batch.is_anchor).astype(bool).sum())
    estimator = kappa
    update = fit.update if fit is not None else None
    nan = float("nan")
    residual_var, real_var, _ = fit.variances if fit is not None else (nan, nan, 0)
    monitor = fit.monitor if fit is not None else GapReading(nan, nan, False)
    return {
        "step": step,
        "n_groups": batch.groups.num_groups,
        "n_anchor_groups": anchor_groups,
        "n_anchor_trajectories": int(batch.is_anchor.sum()),
        "n_failed": int(batch.failed.sum()),
        "n_wm_invalid": int((~batch.wm_valid).sum()),
        "n_known": int((~np.isnan(batch.known_scores)).sum()),
        "n_pairs": update.n_pairs if update else 0,
        "spearman": update.spearman if update else nan,
        "calibration_fallback": update.fallback if update else "previous",
        "calibration_reason": update.reason if update else "no calibration",
        "residual_mse": float(np.mean(residuals**2)) if residuals.size else nan,
        "residual_var": residual_var,
        "real_var": real_var,
        "kappa": estimator.kappa,
        "kappa_raw": estimator.raw,
        "wm_weight": float(np.mean(lam)),
        "wm_weight_estimate": gate.estimate,
        "wm_weight_se": gate.standard_error,
        "wm_weight_dof": gate.dof,
        "gate_clusters": gate.num_clusters,
        "anchor_gap": fit.gap if fit is not None else nan,
        "anchor_gap_trend": monitor.trend,
        "anchor_gap_trend_t": monitor.t_statistic,
        "hacking_alarm": int(monitor.alarm),
        "reward_mean": float(np.nanmean(rewards)) if (~np.isnan(rewards)).any() else 0.0,
    }
