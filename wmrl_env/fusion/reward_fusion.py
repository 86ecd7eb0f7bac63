"""``RewardFusion``: turns world-model scores and a few real scores into GRPO advantages.

One call per training step. The anchor groups (whole groups executed for real) recalibrate
the world model (online debiasing), measure how noisy it is (``kappa``, inverse-variance
denoising) and, for ``method="ppi"``, rectify its bias. Methods:

=========  =====================================================================
``real``   every group executed; real rewards only (the GRPO baseline)
``wm``     raw world-model scores only
``debias`` real on anchors, calibrated world model elsewhere; equal weights
``denoise``real on anchors, raw world model elsewhere; kappa weights
``wmrl``   real on anchors, calibrated world model elsewhere; kappa weights (default)
``ppi``    prediction-powered rectified rewards, unbiased for any world-model bias
=========  =====================================================================

Failed real executions are marked with ``failed`` (their real score is NaN): they leave the
group baseline and get advantage 0. A world-model prediction marked invalid (``wm_valid``)
must belong to an anchored group, whose rewards come from real execution.

Example:
    >>> import numpy as np
    >>> fusion = RewardFusion(method="wmrl", anchor_fraction=0.25, seed=0)
    >>> group_ids = np.repeat(np.arange(8), 4)
    >>> wm = np.random.default_rng(1).uniform(size=32)
    >>> anchors = fusion.select_anchors(group_ids)
    >>> real = np.where(anchors, wm**2, np.nan)          # real scores of the anchors only
    >>> out = fusion.step(group_ids, wm, real)
    >>> int(anchors.sum()), round(float(out.weights.mean()), 6), out.advantages.shape
    (8, 1.0, (32,))
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from wmrl_env.fusion.advantages import SCALINGS, AdvantageScaling, group_advantages
from wmrl_env.fusion.anchors import num_anchor_groups, select_anchor_groups
from wmrl_env.fusion.calibration import CalibrationUpdate, OnlineCalibrator
from wmrl_env.fusion.groups import GroupIndex
from wmrl_env.fusion.kappa import KappaEstimator, fusion_weights, within_group_variances
from wmrl_env.fusion.ppi import power_tuned_lambda, rectified_rewards

METHODS: tuple[str, ...] = ("real", "wm", "debias", "denoise", "wmrl", "ppi")
CALIBRATED_METHODS = ("debias", "wmrl", "ppi")
WEIGHTED_METHODS = ("denoise", "wmrl")


@dataclass(frozen=True)
class FusionOutput:
    """The result of one :meth:`RewardFusion.step`; arrays have one entry per trajectory.

    Attributes:
        rewards: the fused reward ``x`` (NaN for failed executions).
        advantages: group-centred, scaled ``x``, multiplied by ``weights`` (0 when failed).
        weights: positive fusion weights with mean 1, already folded into ``advantages``.
        calibrated: the calibrated world-model score ``f(s)`` (NaN where ``s`` is invalid).
        is_anchor: whether the trajectory's group was executed for real.
        kappa: the smoothed variance ratio in use.
        metrics: diagnostics for logging (see :meth:`RewardFusion.step`).
    """

    rewards: np.ndarray
    advantages: np.ndarray
    weights: np.ndarray
    calibrated: np.ndarray
    is_anchor: np.ndarray
    kappa: float
    metrics: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class _Batch:
    """A validated step input."""

    groups: GroupIndex
    wm: np.ndarray | None
    real: np.ndarray
    failed: np.ndarray
    wm_valid: np.ndarray
    is_anchor: np.ndarray
    pi: np.ndarray


class RewardFusion:
    """Fuses world-model and real rewards for group-based policy optimisers.

    Args:
        method: one of ``"real"``, ``"wm"``, ``"debias"``, ``"denoise"``, ``"wmrl"``, ``"ppi"``.
        anchor_fraction: share of groups executed for real by :meth:`select_anchors`.
        min_anchor_groups: fewest anchor groups per batch.
        advantage_scaling: ``"batch"`` (default), ``"group"`` (classic GRPO) or ``"none"``.
        seed: seeds the anchor draw (a ``np.random.Generator`` of its own).
        window, decay, min_pairs, n_folds: calibration (see :class:`OnlineCalibrator`).
        kappa_max, kappa_smoothing: denoising (see :class:`KappaEstimator`).
        uniform_mix: share of uniform probability in priority-driven anchor selection.
    """

    def __init__(
        self,
        method: str = "wmrl",
        anchor_fraction: float = 0.1,
        min_anchor_groups: int = 1,
        advantage_scaling: AdvantageScaling = "batch",
        seed: int | None = None,
        window: int = 8,
        decay: float = 0.8,
        min_pairs: int = 16,
        n_folds: int = 2,
        kappa_max: float = 10.0,
        kappa_smoothing: float = 0.3,
        uniform_mix: float = 0.5,
    ) -> None:
        if method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {method!r}")
        if not 0.0 <= anchor_fraction <= 1.0:
            raise ValueError(f"anchor_fraction must be in [0, 1], got {anchor_fraction}")
        if min_anchor_groups < 0:
            raise ValueError(f"min_anchor_groups must be >= 0, got {min_anchor_groups}")
        if advantage_scaling not in SCALINGS:
            raise ValueError(f"advantage_scaling must be one of {SCALINGS}")
        self.method = method
        self.anchor_fraction = anchor_fraction
        self.min_anchor_groups = min_anchor_groups
        self.advantage_scaling = advantage_scaling
        self.uniform_mix = uniform_mix
        self.calibrator = OnlineCalibrator(
            window=window, decay=decay, min_pairs=min_pairs, n_folds=n_folds
        )
        self.kappa_estimator = KappaEstimator(kappa_max=kappa_max, smoothing=kappa_smoothing)
        self.ppi_lambda = 1.0
        self.step_count = 0
        self._rng = np.random.default_rng(seed)
        # (group ids, per-trajectory pi, per-trajectory chosen mask) of the last draw
        self._last_selection: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    @property
    def last_inclusion_probabilities(self) -> np.ndarray | None:
        """Per-trajectory inclusion probability of the last :meth:`select_anchors`."""
        return None if self._last_selection is None else self._last_selection[1].copy()

    def reseed(self, seed: int | Sequence[int] | None) -> None:
        """Restart the anchor draw from ``seed`` (e.g. on an env's ``reset(seed=...)``)."""
        self._rng = np.random.default_rng(seed)

    def select_anchors(
        self, group_ids: Sequence[Any] | np.ndarray, group_priorities: np.ndarray | None = None
    ) -> np.ndarray:
        """Choose whole groups to execute for real; returns a bool mask per trajectory.

        ``group_priorities`` (per trajectory, constant within a group, ``>= 0``) makes groups
        with a higher priority (e.g. predicted error) likelier anchors; without it the draw
        is uniform. Method ``"real"`` anchors every group, ``"wm"`` none.
        """
        groups = GroupIndex.from_ids(group_ids)
        m = groups.num_groups
        if self.method == "real":
            chosen, pi = np.ones(m, dtype=bool), np.ones(m)
        elif self.method == "wm":
            chosen, pi = np.zeros(m, dtype=bool), np.zeros(m)
        else:
            priorities = None
            if group_priorities is not None:
                per_trajectory = np.asarray(group_priorities, dtype=np.float64)
                _check_length("group_priorities", per_trajectory, groups.inverse.size)
                priorities = groups.mean(per_trajectory)
                if not np.allclose(groups.broadcast(priorities), per_trajectory):
                    raise ValueError("group_priorities must be constant within each group")
            n_anchor = num_anchor_groups(m, self.anchor_fraction, self.min_anchor_groups)
            chosen, pi = select_anchor_groups(m, n_anchor, self._rng, priorities, self.uniform_mix)
        mask = groups.broadcast(chosen)
        self._last_selection = (np.asarray(group_ids).copy(), groups.broadcast(pi), mask)
        return mask.copy()

    def step(
        self,
        group_ids: Sequence[Any] | np.ndarray,
        wm_scores: np.ndarray | None,
        real_scores: np.ndarray,
        *,
        failed: np.ndarray | None = None,
        wm_valid: np.ndarray | None = None,
        inclusion_probabilities: np.ndarray | None = None,
    ) -> FusionOutput:
        """Fuse one batch. ``real_scores`` is NaN where a trajectory was not executed.

        ``metrics`` holds: ``n_groups``, ``n_anchor_groups``, ``n_anchor_trajectories``,
        ``n_failed``, ``n_pairs`` (calibration window), ``spearman`` (window),
        ``calibration_fallback`` and ``calibration_reason``, ``residual_mse`` (cross-fitted,
        this step's anchors), ``residual_var``/``real_var`` (within-group), ``kappa``,
        ``kappa_raw``, ``anchor_gap`` (mean cross-fitted calibrated minus real score on
        anchors: positive means the world model over-scores, the reward-hacking signal),
        ``ppi_lambda`` and ``reward_mean``.
        """
        batch = self._validate(
            group_ids, wm_scores, real_scores, failed, wm_valid, inclusion_probabilities
        )
        pair = batch.is_anchor & ~batch.failed & batch.wm_valid
        update = None
        if batch.wm is not None and pair.any():
            update = self.calibrator.update(
                batch.wm[pair], batch.real[pair], batch.groups.inverse[pair]
            )
        calibrated = np.full(batch.real.shape, np.nan)
        if batch.wm is not None:
            calibrated[batch.wm_valid] = self.calibrator.transform(batch.wm[batch.wm_valid])

        cross_fitted = np.full(batch.real.shape, np.nan)
        if update is not None:
            cross_fitted[pair] = update.cross_fitted
        known = pair & ~np.isnan(cross_fitted)
        crossfit_variances = within_group_variances(
            batch.real[known] - cross_fitted[known], batch.real[known], batch.groups.inverse[known]
        )
        if self.method == "denoise":  # the raw world model is the stream being weighed
            residuals = batch.real[pair] - batch.wm[pair]
            self.kappa_estimator.update(residuals, batch.real[pair], batch.groups.inverse[pair])
        else:
            residuals = batch.real[known] - cross_fitted[known]
            if self.method == "wmrl":
                self.kappa_estimator.fold_in(*crossfit_variances)

        rewards = self._rewards(batch, calibrated, cross_fitted, known)
        if self.method in WEIGHTED_METHODS:
            weights = fusion_weights(batch.is_anchor, self.kappa_estimator.kappa)
        else:
            weights = np.ones(batch.real.shape)
        advantages = group_advantages(rewards, batch.groups, self.advantage_scaling) * weights
        self.step_count += 1
        metrics = self._metrics(
            batch, update, residuals, cross_fitted, known, rewards, crossfit_variances
        )
        return FusionOutput(
            rewards=rewards,
            advantages=advantages,
            weights=weights,
            calibrated=calibrated,
            is_anchor=batch.is_anchor,
            kappa=self.kappa_estimator.kappa,
            metrics=metrics,
        )

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue bit-identically (pickle- and torch.save-friendly)."""
        return {
            "method": self.method,
            "calibrator": self.calibrator.state_dict(),
            "kappa": self.kappa_estimator.state_dict(),
            "ppi_lambda": self.ppi_lambda,
            "step_count": self.step_count,
            "rng": self._rng.bit_generator.state,
            "last_selection": self._last_selection,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if state["method"] != self.method:
            raise ValueError(f"state is for method {state['method']!r}, not {self.method!r}")
        self.calibrator.load_state_dict(state["calibrator"])
        self.kappa_estimator.load_state_dict(state["kappa"])
        self.ppi_lambda = float(state["ppi_lambda"])
        self.step_count = int(state["step_count"])
        self._rng.bit_generator.state = state["rng"]
        selection = state["last_selection"]
        self._last_selection = None if selection is None else tuple(np.array(a) for a in selection)

    # ------------------------------------------------------------------ internals
    def _rewards(
        self, batch: _Batch, calibrated: np.ndarray, cross_fitted: np.ndarray, known: np.ndarray
    ) -> np.ndarray:
        real = np.where(batch.failed, np.nan, batch.real)
        if self.method == "real":
            return real
        if self.method == "wm":
            return batch.wm.copy()
        if self.method == "ppi":
            lam = power_tuned_lambda(
                batch.real[known], cross_fitted[known], batch.groups.inverse[known]
            )
            self.ppi_lambda = self.ppi_lambda if lam is None else lam
            # an anchor without an out-of-sample prediction falls back to the current map
            rectifier = np.where(np.isnan(cross_fitted), calibrated, cross_fitted)
            rewards = rectified_rewards(
                calibrated, rectifier, real, batch.is_anchor, batch.pi, self.ppi_lambda
            )
            # an anchor whose world-model score is invalid has nothing to rectify with
            return np.where(batch.is_anchor & ~batch.wm_valid, real / batch.pi, rewards)
        wm_stream = batch.wm if self.method == "denoise" else calibrated
        return np.where(batch.is_anchor, real, wm_stream)

    def _metrics(
        self,
        batch: _Batch,
        update: CalibrationUpdate | None,
        residuals: np.ndarray,
        cross_fitted: np.ndarray,
        known: np.ndarray,
        rewards: np.ndarray,
        crossfit_variances: tuple[float, float, int],
    ) -> dict[str, Any]:
        anchor_groups = int(batch.groups.count(batch.is_anchor).astype(bool).sum())
        estimator = self.kappa_estimator
        with np.errstate(invalid="ignore"):
            gap = cross_fitted[known] - batch.real[known]
        residual_var, real_var, _ = crossfit_variances
        return {
            "step": self.step_count,
            "n_groups": batch.groups.num_groups,
            "n_anchor_groups": anchor_groups,
            "n_anchor_trajectories": int(batch.is_anchor.sum()),
            "n_failed": int(batch.failed.sum()),
            "n_wm_invalid": int((~batch.wm_valid).sum()),
            "n_pairs": update.n_pairs if update else 0,
            "spearman": update.spearman if update else float("nan"),
            "calibration_fallback": update.fallback if update else "previous",
            "calibration_reason": update.reason if update else "no anchor pairs this step",
            "residual_mse": float(np.mean(residuals**2)) if residuals.size else float("nan"),
            "residual_var": residual_var,
            "real_var": real_var,
            "kappa": estimator.kappa,
            "kappa_raw": estimator.raw,
            "anchor_gap": float(np.mean(gap)) if gap.size else float("nan"),
            "ppi_lambda": self.ppi_lambda,
            "reward_mean": float(np.nanmean(rewards)) if (~np.isnan(rewards)).any() else 0.0,
        }

    def _validate(
        self,
        group_ids: Sequence[Any] | np.ndarray,
        wm_scores: np.ndarray | None,
        real_scores: np.ndarray,
        failed: np.ndarray | None,
        wm_valid: np.ndarray | None,
        inclusion_probabilities: np.ndarray | None,
    ) -> _Batch:
        groups = GroupIndex.from_ids(group_ids)
        n = groups.inverse.size
        real = _as_float("real_scores", real_scores, n)
        if np.isinf(real).any():
            raise ValueError(
                f"real_scores has inf at index {int(np.flatnonzero(np.isinf(real))[0])}"
            )
        failed = _as_bool("failed", failed, n, default=False)
        if (failed & ~np.isnan(real)).any():
            index = int(np.flatnonzero(failed & ~np.isnan(real))[0])
            raise ValueError(f"trajectory {index} is marked failed but has a real score")
        wm_valid = _as_bool("wm_valid", wm_valid, n, default=True)
        wm = None
        if wm_scores is None:
            if self.method != "real":
                raise ValueError(f"method {self.method!r} needs wm_scores")
        else:
            wm = _as_float("wm_scores", wm_scores, n)
            bad = wm_valid & ~np.isfinite(wm)
            if bad.any():
                raise ValueError(
                    f"wm_scores has {int(bad.sum())} NaN/inf values (first at index "
                    f"{int(np.flatnonzero(bad)[0])}); mark garbage predictions with wm_valid=False"
                )

        executed = ~np.isnan(real) | failed
        executed_per_group = groups.count(executed)
        anchored = executed_per_group > 0
        partial = anchored & (executed_per_group < groups.sizes)
        if partial.any():
            raise ValueError(
                f"group {groups.ids[np.flatnonzero(partial)[0]]!r} has real scores on some "
                "members and NaN on others; mark failed executions with failed=True"
            )
        is_anchor = groups.broadcast(anchored)
        if self.method == "real" and not is_anchor.all():
            raise ValueError("method 'real' needs a real score (or failed=True) for every group")
        if self.method != "real" and (~wm_valid & ~is_anchor).any():
            raise ValueError(
                "a world-model prediction marked invalid (wm_valid=False) is in a group that "
                "was not executed: execute that group for real"
            )
        pi = self._inclusion(group_ids, groups, is_anchor, inclusion_probabilities)
        return _Batch(groups, wm, real, failed, wm_valid, is_anchor, pi)

    def _inclusion(
        self,
        group_ids: Sequence[Any] | np.ndarray,
        groups: GroupIndex,
        is_anchor: np.ndarray,
        given: np.ndarray | None,
    ) -> np.ndarray:
        """Per-trajectory inclusion probability of each anchored group.

        Order of precedence: ``given``; the last :meth:`select_anchors` for these group ids
        (a group anchored outside that draw, e.g. forced because its prediction was invalid,
        counts as certain, ``pi = 1``); else uniform ``m / M``.
        """
        n = groups.inverse.size
        if given is not None:
            pi = _as_float("inclusion_probabilities", given, n)
        elif self._last_selection is not None and _same_ids(self._last_selection[0], group_ids):
            _, selected_pi, selected = self._last_selection
            if self.method == "ppi" and (selected & ~is_anchor).any():
                raise ValueError(
                    "a group chosen by select_anchors has no real score: PPI needs every "
                    "selected group executed (mark failures with failed=True)"
                )
            pi = np.where(is_anchor & ~selected, 1.0, selected_pi)
        else:
            m = int(groups.count(is_anchor).astype(bool).sum())
            pi = np.full(n, m / groups.num_groups)
        anchored_pi = pi[is_anchor]
        if anchored_pi.size and not ((anchored_pi > 0) & (anchored_pi <= 1)).all():
            raise ValueError("inclusion probabilities of anchored groups must be in (0, 1]")
        return pi


def _same_ids(a: np.ndarray, b: Sequence[Any] | np.ndarray) -> bool:
    b = np.asarray(b)
    return a.shape == b.shape and bool(np.all(a == b))


def _check_length(name: str, array: np.ndarray, n: int) -> None:
    if array.ndim != 1 or array.shape[0] != n:
        raise ValueError(f"{name} has shape {array.shape}, expected ({n},) like group_ids")


def _as_float(name: str, values: Any, n: int) -> np.ndarray:
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be numbers: {exc}") from exc
    _check_length(name, array, n)
    return array


def _as_bool(name: str, values: Any, n: int, default: bool) -> np.ndarray:
    if values is None:
        return np.full(n, default)
    array = np.asarray(values)
    if array.dtype != bool:
        raise ValueError(f"{name} must be a bool array, got dtype {array.dtype}")
    _check_length(name, array, n)
    return array
