"""``RewardFusion``: turns world-model scores and a few real scores into GRPO advantages.

One call per training step. The anchor groups (whole groups executed for real) recalibrate
the world model (online debiasing), measure how noisy it is (``kappa``, inverse-variance
denoising) and, for ``method="ppi"``, rectify its bias. Methods:

=========  =====================================================================
``real``   every group executed; real rewards only (the GRPO baseline)
``wm``     raw world-model scores only
``debias`` real on anchors, calibrated world model elsewhere; equal weights
``denoise``real on anchors, raw world model elsewhere; kappa weights
``wmrl``   real on anchors, lam * calibrated world model elsewhere; kappa weights (default)
``ppi``    prediction-powered rectified rewards, unbiased over the anchor draw for any
           world-model bias
=========  =====================================================================

``lam``, the world model's weight, stays 0 until the anchors of earlier steps give clear
evidence that the calibrated score predicts the real one (:class:`WorldModelGate`), so a
useless world model costs nothing against GRPO on the anchor groups alone. Each step also
feeds the reward-hacking monitor (:class:`GapMonitor`), except under ``"real"``, whose rewards
do not use the world model. A round is ``select_anchors`` ->
(``force_anchors``) -> ``step``; the fusion is the one record of inclusion probabilities.

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

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from wmrl_env.fusion.advantages import AdvantageScaling, group_advantages
from wmrl_env.fusion.anchors import draw_for_method
from wmrl_env.fusion.calibration import OnlineCalibrator
from wmrl_env.fusion.cluster_gate import ClusterGates
from wmrl_env.fusion.gate import HORIZON, WorldModelGate
from wmrl_env.fusion.groups import GroupIndex
from wmrl_env.fusion.kappa import KappaEstimator, fusion_weights, within_group_variances
from wmrl_env.fusion.monitor import GapMonitor, GapReading
from wmrl_env.fusion.outputs import AnchorFit, FusionOutput, step_metrics
from wmrl_env.fusion.ppi import power_tuned_lambda
from wmrl_env.fusion.rewards import (
    at_natural_level,
    calibrated_scores,
    fused_rewards,
    natural_rewards,
)
from wmrl_env.fusion.selection import AnchorRecord
from wmrl_env.fusion.validation import (
    CALIBRATED_METHODS,
    GATED_METHODS,
    METHODS,
    MONITORED_METHODS,
    WEIGHTED_METHODS,
    check_options,
    per_group_priorities,
    validate_step,
)

__all__ = ["CALIBRATED_METHODS", "GATED_METHODS", "METHODS", "RewardFusion"]


class RewardFusion:
    """Fuses world-model and real rewards for group-based policy optimisers.

    Args:
        method: one of ``"real"``, ``"wm"``, ``"debias"``, ``"denoise"``, ``"wmrl"``, ``"ppi"``.
        anchor_fraction: share of groups executed for real by :meth:`select_anchors`.
        min_anchor_groups: fewest anchor groups per batch.
        advantage_scaling: ``"batch"`` (default), ``"group"`` (classic GRPO: each group
            divided by the standard deviation of its *natural* rewards, real or calibrated,
            so ``lam`` and the weights survive; refused for ``ppi``, whose ``1 / pi``
            rectification no per-group scale can keep unbiased) or ``"none"``.
        seed: seeds the anchor draw (a ``np.random.Generator`` of its own).
        window, decay, min_pairs, n_folds: calibration (see :class:`OnlineCalibrator`).
        kappa_max, kappa_smoothing: denoising (see :class:`KappaEstimator`).
        uniform_mix: share of uniform probability in priority-driven anchor selection.
        wm_gate: ``"evidence"`` (default): the world model's weight ``lam`` (``wmrl``: its
            groups' calibrated scores are shrunk to ``mean_g f + lam (f - mean_g f)``;
            ``ppi``: the power-tuning ``lam``) is ``clip(min(lam_hat, 2 LCB), 0, 1)`` of the
            regression slope of real on calibrated centred scores pooled over the run
            (:class:`WorldModelGate`), 0 without clear evidence. ``"off"``: ``wmrl`` uses
            ``lam = 1`` and ``ppi`` the slope of the current step alone (the earlier design).
        gate_decay, gate_alpha, gate_horizon: the gate's weight per step of age, one-sided
            level, and the steps without evidence over which its weight falls to 0.
        gate_std: ``"wls"`` (default): with :meth:`step`'s ``wm_std``, the gate also fits the
            precision-weighted slope (``gate.weighted_estimate``, a diagnostic,
            :mod:`~wmrl_env.fusion.precision`); the weight stays the unweighted slope's, whose
            never-worse range holds whatever the std says. ``"ignore"``: no weighted slope.
        gate_scope: ``"pooled"`` (default): one weight from every task's anchors;
            ``"cluster"``: each group's from its own cluster's (:class:`ClusterGates`).
        monitor_window, monitor_alpha: the reward-hacking monitor (see :class:`GapMonitor`).
        centre_groups: centre residuals within groups for ``kappa`` (``False`` for groups of
            one, e.g. a single-env wrapper).
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
        wm_gate: str = "evidence",
        gate_decay: float = 0.95,
        gate_alpha: float = 0.05,
        gate_horizon: int | None = HORIZON,
        gate_std: str = "wls",
        gate_scope: str = "pooled",
        monitor_window: int = 16,
        monitor_alpha: float = 0.001,
        centre_groups: bool = True,
    ) -> None:
        check_options(method, anchor_fraction, min_anchor_groups, advantage_scaling, wm_gate,
                      gate_std, gate_scope)  # fmt: skip
        self.method = method
        self.anchor_fraction = anchor_fraction
        self.min_anchor_groups = min_anchor_groups
        self.advantage_scaling = advantage_scaling
        self.uniform_mix = uniform_mix
        self.wm_gate = wm_gate
        self.gate_std = gate_std
        self.calibrator = OnlineCalibrator(
            window=window, decay=decay, min_pairs=min_pairs, n_folds=n_folds
        )
        self.kappa_estimator = KappaEstimator(
            kappa_max=kappa_max, smoothing=kappa_smoothing, centre=centre_groups
        )
        gate_type = ClusterGates if gate_scope == "cluster" else WorldModelGate
        self.gate = gate_type(decay=gate_decay, alpha=gate_alpha, horizon=gate_horizon)
        self.monitor = GapMonitor(window=monitor_window, alpha=monitor_alpha)
        self.step_lambda = 1.0  # wm_gate="off", ppi: the last per-step power-tuned lambda
        self.step_count = 0
        self._rng = np.random.default_rng(seed)
        self._record: AnchorRecord | None = None  # the anchors of the round in progress

    @property
    def wm_weight(self) -> float:
        """The world model's weight ``lam`` the next step will use (see ``wm_gate``; the mean
        over clusters with ``gate_scope="cluster"``, :meth:`wm_weights` gives each sample's)."""
        if self.method not in GATED_METHODS:
            return 1.0
        if self.wm_gate == "evidence":
            return self.gate.weight
        return self.step_lambda if self.method == "ppi" else 1.0

    def wm_weights(self, clusters: Any) -> float | np.ndarray:
        """``lam`` per sample of ``clusters`` (``gate_scope="cluster"``), else :attr:`wm_weight`."""
        gated = self.method in GATED_METHODS and self.wm_gate == "evidence"
        return self.gate.weights_for(clusters) if gated else self.wm_weight

    @property
    def inclusion_probabilities(self) -> np.ndarray | None:
        """Per trajectory, the inclusion probability of its group in the round in progress
        (after :meth:`select_anchors` / :meth:`force_anchors`; 0 for groups not anchored);
        ``None`` when no round is in progress."""
        return None if self._record is None else self._record.per_trajectory_pi()

    def reseed(self, seed: int | Sequence[int] | None) -> None:
        """Restart the anchor draw from ``seed`` (e.g. on an env's ``reset(seed=...)``)."""
        self._rng = np.random.default_rng(seed)

    def select_anchors(
        self, group_ids: Sequence[Any] | np.ndarray, group_priorities: np.ndarray | None = None
    ) -> np.ndarray:
        """Start a round: choose whole groups to execute for real; a bool mask per trajectory.

        ``group_priorities`` (per trajectory, constant within a group, ``>= 0``) makes groups
        with a higher priority (e.g. predicted error, :func:`uncertainty_priorities`) likelier
        anchors; without it the draw is uniform. Method ``"real"`` anchors every group, ``"wm"``
        none. The draw and its inclusion probabilities are recorded for :meth:`step`.
        """
        groups = GroupIndex.from_ids(group_ids)
        drawn = self.method not in ("real", "wm")
        priorities = per_group_priorities(groups, group_priorities) if drawn else None
        chosen, pi = draw_for_method(self.method, groups.num_groups, self.anchor_fraction,
                                     self.min_anchor_groups, self._rng, priorities,
                                     self.uniform_mix)  # fmt: skip
        self._record = AnchorRecord.draw(group_ids, chosen, pi)
        return groups.broadcast(chosen)

    def force_anchors(self, trajectories: np.ndarray) -> np.ndarray:
        """Anchor every group holding a ``True`` entry (per trajectory of the round started by
        :meth:`select_anchors`) with certainty, ``pi = 1`` — e.g. a group whose world-model
        prediction is invalid, executed whether drawn or not. Returns the round's anchors
        per trajectory."""
        if self._record is None:
            raise RuntimeError("force_anchors needs a round: call select_anchors first")
        return self._record.force(trajectories)

    def screen_anchors(
        self, executed: np.ndarray, member_pi: np.ndarray, known: np.ndarray | None = None
    ) -> np.ndarray:
        """Execute only the ``executed`` members of the round's anchor groups (world-model
        screening, :func:`~wmrl_env.fusion.screening.screen_members`), each with probability
        ``member_pi`` given its group; the others are scored by the world model. Each
        member's inclusion probability becomes ``pi_g * member_pi``. ``known`` (per
        trajectory): members whose outcome is known without execution (pass the same to
        :meth:`step` as ``known_scores``); they are neither executed nor screened out.
        Returns the members to execute, per trajectory. ``ppi`` needs ``member_pi > 0`` for
        every screened member."""
        if self._record is None:
            raise RuntimeError("screen_anchors needs a round: call select_anchors first")
        return self._record.screen(executed, member_pi, known)

    def step(
        self,
        group_ids: Sequence[Any] | np.ndarray,
        wm_scores: np.ndarray | None,
        real_scores: np.ndarray,
        *,
        failed: np.ndarray | None = None,
        wm_valid: np.ndarray | None = None,
        inclusion_probabilities: np.ndarray | None = None,
        clusters: Sequence[Any] | np.ndarray | None = None,
        screened: np.ndarray | None = None,
        wm_std: np.ndarray | None = None,
        known_scores: np.ndarray | None = None,
    ) -> FusionOutput:
        """Fuse one batch and end the round. ``real_scores`` is NaN where not executed.

        ``failed`` marks infrastructure failures, ``known_scores`` outcomes known without
        execution, ``clusters`` each group's task; the rules for these, ``wm_std``, and
        where inclusion probabilities come from: :mod:`~wmrl_env.fusion.validation`.

        ``screened`` (per trajectory; or recorded by :meth:`screen_anchors`): members of
        anchor groups left unexecuted by world-model screening; the executed members are the
        anchors, ``inclusion_probabilities`` per member (``pi_g * pi_{i|g}``), the others
        scored by the world model at the executed members' level (:mod:`~.rewards`).

        ``metrics``: see :func:`~wmrl_env.fusion.outputs.step_metrics`.
        """
        batch = validate_step(
            self.method,
            self._record,
            group_ids,
            wm_scores,
            real_scores,
            failed,
            wm_valid,
            inclusion_probabilities,
            clusters,
            screened,
            wm_std,
            known_scores,
        )
        known_outcome = ~np.isnan(batch.known_scores)
        # lam and (for exact PPI) the map come from earlier steps only, so they are
        # independent of this step's anchor draw
        lam = self.wm_weights(batch.clusters)
        exact_ppi = self.method == "ppi" and self.wm_gate == "evidence"
        prior_map = self.calibrator.map
        pair = batch.is_anchor & ~batch.failed & batch.wm_valid & ~known_outcome
        fit = None
        if batch.wm is not None and self.method != "wm":  # every step ages the window
            cluster_labels = None if batch.clusters is None else batch.clusters[pair]
            use_std = batch.wm_std is not None and self.gate_std == "wls"
            fit = self.observe_anchors(
                batch.wm[pair],
                batch.real[pair],
                batch.groups.inverse[pair],
                clusters=cluster_labels,
                weights=1.0 / batch.pi[pair],
                wm_std=batch.wm_std[pair] if use_std else None,
            )
        current = prior_map if exact_ppi else self.calibrator.map
        calibrated, cross_fitted = calibrated_scores(batch, current, pair, fit)
        fitted = pair & ~np.isnan(cross_fitted)
        if self.method == "ppi" and self.wm_gate == "off":
            step_lambda = power_tuned_lambda(
                batch.real[fitted], cross_fitted[fitted], batch.groups.inverse[fitted]
            )
            self.step_lambda = self.step_lambda if step_lambda is None else step_lambda
            lam = self.step_lambda
        # PPI's rectifier: the prior map (exact), else the cross-fitted prediction where fitted
        rectifier = calibrated if exact_ppi else np.where(fitted, cross_fitted, calibrated)

        rewards = fused_rewards(self.method, batch, calibrated, rectifier, lam)
        if self.method in WEIGHTED_METHODS:
            weights = fusion_weights(batch.is_anchor, self.kappa_estimator.kappa)
        else:
            weights = np.ones(batch.real.shape)
        scale_from = natural_rewards(self.method, batch, calibrated)
        if self.method == "wmrl":
            rewards = at_natural_level(rewards, scale_from, batch, ~known_outcome)
        rewards = np.where(known_outcome, batch.known_scores, rewards)
        if scale_from is not None:
            scale_from = np.where(known_outcome, batch.known_scores, scale_from)
        advantages = group_advantages(rewards, batch.groups, self.advantage_scaling, scale_from)
        advantages *= weights
        self.step_count += 1
        self._record = None
        residuals = batch.real[fitted] - cross_fitted[fitted]
        if self.method == "denoise":
            residuals = batch.real[pair] - batch.wm[pair]
        metrics = step_metrics(
            batch, fit, residuals, rewards, lam, self.step_count, self.kappa_estimator, self.gate
        )
        inclusion = np.where(batch.is_anchor, batch.pi, np.nan)
        kappa = self.kappa_estimator.kappa
        return FusionOutput(
            rewards, advantages, weights, calibrated, batch.is_anchor, inclusion, kappa, metrics
        )

    def observe_anchors(
        self,
        wm_scores: np.ndarray,
        real_scores: np.ndarray,
        groups: np.ndarray | None = None,
        *,
        clusters: np.ndarray | None = None,
        weights: np.ndarray | None = None,
        wm_std: np.ndarray | None = None,
    ) -> AnchorFit:
        """Learn from one step's anchor pairs: calibrate, cross-fit, update ``kappa``, the
        world model's weight and the reward-hacking monitor. :meth:`step` calls it; call it
        directly where the rewards are assembled elsewhere (a single-env wrapper).

        Per pair: ``groups`` its group (default: its own), ``clusters`` its task (see
        :meth:`step`), ``weights`` its design weight (``1 / pi`` of its group: calibration,
        ``kappa`` and gate are fitted with them), ``wm_std`` its predictive std (``gate_std``).
        With ``centre_groups=False`` the gate centres each call's pairs together. No pairs
        still counts as a step: the calibration window and the gate's pool age."""
        wm = np.asarray(wm_scores, dtype=np.float64)
        lam = self.wm_weights(clusters) if wm.size else self.wm_weight  # fixed before the step
        real = np.asarray(real_scores, dtype=np.float64)
        labels = np.arange(wm.size) if groups is None else np.asarray(groups)
        w = np.ones(wm.size) if weights is None else np.asarray(weights, dtype=np.float64)
        if w.shape != wm.shape or not (np.isfinite(w).all() and (w > 0).all()):
            raise ValueError(f"weights must be {wm.shape} positive finite numbers")
        update = self.calibrator.update(wm, real, labels, weights=w)
        cross_fitted = update.cross_fitted
        known = ~np.isnan(cross_fitted)
        r, f, g, wk = real[known], cross_fitted[known], labels[known], w[known]
        centre = self.kappa_estimator.centre
        # kappa weighs the stream used: f shrunk by lam (per pair with a per-cluster gate)
        lam = np.asarray(lam)[known] if np.ndim(lam) else lam  # towards its level
        used = f.mean() + lam * (f - f.mean()) if self.method == "wmrl" and f.size else f
        variances = within_group_variances(r - used, r, g, centre, weights=wk)
        if self.method == "denoise":  # the raw world model is the stream being weighed
            self.kappa_estimator.fold_in(
                *within_group_variances(real - wm, real, labels, centre, weights=w)
            )
        elif self.method == "wmrl":
            self.kappa_estimator.fold_in(*variances)
        gate_groups = g if centre else np.zeros(g.size, dtype=np.intp)
        gate_clusters = None if clusters is None else np.asarray(clusters, dtype=object)[known]
        std = None if wm_std is None else np.asarray(wm_std, dtype=np.float64)[known]
        self.gate.update(r, f, gate_groups, gate_clusters, wk, std)
        gap = float(np.mean(f - r)) if r.size else float("nan")
        reading = GapReading(math.nan, math.nan, False)
        if self.method in MONITORED_METHODS:
            reading = self.monitor.update(gap)
        return AnchorFit(update, cross_fitted, known, variances, gap, reading)

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue bit-identically (pickle- and torch.save-friendly)."""
        return {
            "method": self.method,
            "calibrator": self.calibrator.state_dict(),
            "kappa": self.kappa_estimator.state_dict(),
            "gate": self.gate.state_dict(),
            "monitor": self.monitor.state_dict(),
            "step_lambda": self.step_lambda,
            "step_count": self.step_count,
            "rng": self._rng.bit_generator.state,
            "record": None if self._record is None else self._record.state_dict(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if state["method"] != self.method:
            raise ValueError(f"state is for method {state['method']!r}, not {self.method!r}")
        self.calibrator.load_state_dict(state["calibrator"])
        self.kappa_estimator.load_state_dict(state["kappa"])
        self.gate.load_state_dict(state["gate"])
        self.monitor.load_state_dict(state["monitor"])
        self.step_lambda = float(state["step_lambda"])
        self.step_count = int(state["step_count"])
        self._rng.bit_generator.state = state["rng"]
        record = state["record"]
        self._record = None if record is None else AnchorRecord.from_state_dict(record)
