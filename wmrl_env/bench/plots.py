"""PNG figures of a benchmark: learning curves, calibration, diagnostics, hacking signal.

Needs matplotlib (``pip install 'wmrl-env[bench]'``).
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from wmrl_env.bench.records import RunRecord
from wmrl_env.bench.report import COST, mean_curve, score_band
from wmrl_env.utils.imports import require

FOCUS_ARM = "wmrl"


def _pyplot():
    matplotlib = require("matplotlib", "benchmark plots")
    matplotlib.use("Agg")
    return require("matplotlib.pyplot", "benchmark plots")


def _by_arm(runs: Sequence[RunRecord]) -> dict[str, list[RunRecord]]:
    grouped: dict[str, list[RunRecord]] = defaultdict(list)
    for run in runs:
        grouped[run.arm].append(run)
    return grouped


def _series(runs: Sequence[RunRecord], name: str) -> tuple[np.ndarray, np.ndarray]:
    length = min(len(run.steps) for run in runs)
    values = np.array([[getattr(s, name) for s in run.steps[:length]] for run in runs], float)
    with warnings.catch_warnings():  # a step no seed evaluated is NaN, not an error
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.arange(length), np.nanmean(values, axis=0)


def learning_curves(
    runs: Sequence[RunRecord],
    path: Path,
    cost: str = COST,
    cost_label: str = "cumulative real-execution seconds",
    score_label: str = "held-out score",
) -> None:
    """Score against cumulative real cost (log) and against rounds, mean and seed band."""
    plt = _pyplot()
    fig, (by_seconds, by_step) = plt.subplots(1, 2, figsize=(10, 4))
    for arm, arm_runs in _by_arm(runs).items():
        seconds, scores = mean_curve(arm_runs, cost)
        low, high = score_band(arm_runs)
        steps = [s.step for s in arm_runs[0].evaluated[: scores.size]]
        x = np.maximum(seconds, 1.0)  # the world-model arm spends none: drawn at 1 s
        (line,) = by_seconds.plot(x, scores, marker=".", label=arm)
        by_seconds.fill_between(x, low, high, color=line.get_color(), alpha=0.15)
        by_step.plot(steps, scores, marker=".", label=arm)
        by_step.fill_between(steps, low, high, color=line.get_color(), alpha=0.15)
    by_seconds.set_xscale("log")
    by_seconds.set_xlabel(f"{cost_label} (log; 0 drawn at 1)")
    by_step.set_xlabel("training round")
    for ax in (by_seconds, by_step):
        ax.set_ylabel(score_label)
        ax.grid(alpha=0.3)
    by_step.legend(fontsize=8)
    fig.suptitle(f"{score_label.capitalize()} against real cost (mean, 95 % band over seeds)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def calibration_curve(runs: Sequence[RunRecord], path: Path) -> bool:
    """The final calibration map of the focus arm's first seed; False when there is none."""
    run = next((r for r in runs if r.arm == FOCUS_ARM and r.calibration), None)
    if run is None:
        return False
    plt = _pyplot()
    cal = run.calibration
    fig, ax = plt.subplots(figsize=(5.5, 4))
    ax.scatter(cal["pair_wm"], cal["pair_real"], s=8, alpha=0.4, label="anchor pairs in window")
    ax.plot(cal["grid_wm"], cal["grid_calibrated"], color="C3", lw=2, label="calibration map f")
    ax.set_xlabel("world-model score")
    ax.set_ylabel("real normalised score")
    ax.set_title(f"Calibration at the end ({run.arm}, seed {run.seed})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def diagnostics(runs: Sequence[RunRecord], path: Path) -> bool:
    """kappa, rank correlation and residual error over steps for the focus arm."""
    arm_runs = _by_arm(runs).get(FOCUS_ARM)
    if not arm_runs:
        return False
    plt = _pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.5))
    for ax, name, label in zip(
        axes,
        ("kappa", "spearman", "residual_mse"),
        ("kappa", "rank correlation (world model vs real)", "cross-fitted residual MSE"),
        strict=True,
    ):
        steps, values = _series(arm_runs, name)
        ax.plot(steps, values)
        ax.set_xlabel("training step")
        ax.set_title(label, fontsize=9)
        ax.grid(alpha=0.3)
    fig.suptitle(f"Fusion diagnostics ({FOCUS_ARM}, mean over seeds)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def anchor_gap(runs: Sequence[RunRecord], path: Path) -> None:
    """Calibrated minus real score on anchors over steps: the reward-hacking signal."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for arm, arm_runs in _by_arm(runs).items():
        steps, gap = _series(arm_runs, "anchor_gap")
        if np.isfinite(gap).any():
            ax.plot(steps, gap, label=arm)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xlabel("training step")
    ax.set_ylabel("mean f(s) - real on anchors")
    ax.set_title("World-model over-scoring on anchors (reward-hacking signal)", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_all(runs: Sequence[RunRecord], folder: Path) -> list[Path]:
    """Every figure into ``folder``; returns the files written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = [folder / "score_vs_real_seconds.png", folder / "anchor_gap.png"]
    learning_curves(runs, written[0])
    anchor_gap(runs, written[1])
    if calibration_curve(runs, folder / "calibration.png"):
        written.append(folder / "calibration.png")
    if diagnostics(runs, folder / "diagnostics.png"):
        written.append(folder / "diagnostics.png")
    return written
