"""Figures for docs/fusion.md: the calibration curve and kappa against its oracle.

python benchmarks/plot_fusion.py      # writes docs/figures/fusion_*.png (needs matplotlib)
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from wmrl_env.fusion import RewardFusion
from wmrl_env.fusion.synthetic import SyntheticWorld

OUT = Path(__file__).resolve().parent.parent / "docs" / "figures"


def calibration_curve() -> None:
    world = SyntheticWorld(
        num_groups=256,
        group_size=8,
        wm_noise=0.05,
        group_bias=0.05,
        distortion=lambda x: 0.3 + 2.0 * x**2,
    )
    rng = np.random.default_rng(0)
    fusion = RewardFusion(method="wmrl", seed=0)
    for step in range(4):
        batch = world.sample(rng, step)
        anchors = fusion.select_anchors(batch.group_ids)
        out = fusion.step(
            batch.group_ids, batch.wm_scores, np.where(anchors, batch.real_scores, np.nan)
        )
    grid = np.linspace(batch.wm_scores.min(), batch.wm_scores.max(), 400)
    fig, ax = plt.subplots(figsize=(5.5, 4))
    ax.scatter(
        batch.wm_scores[anchors],
        batch.real_scores[anchors],
        s=6,
        alpha=0.4,
        label="anchor pairs (s, real r)",
    )
    ax.plot(
        grid,
        fusion.calibrator.transform(grid),
        color="C3",
        lw=2,
        label=f"isotonic map f(s) ({out.metrics['n_pairs']} window pairs)",
    )
    truth = np.linspace(0, 1, 200)
    ax.plot(0.3 + 2.0 * truth**2, truth, "k--", lw=1, label="true inverse distortion")
    ax.set_xlabel("world-model score s")
    ax.set_ylabel("real score")
    ax.set_title("Online debiasing after 4 steps")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(OUT / "fusion_calibration.png", dpi=110)


def kappa_over_steps() -> None:
    fig, ax = plt.subplots(figsize=(5.5, 3.5))
    rng = np.random.default_rng(1)
    for noise, colour in ((0.02, "C0"), (0.1, "C1"), (0.2, "C2")):
        world = SyntheticWorld(num_groups=128, group_size=8, wm_noise=noise)
        fusion = RewardFusion(method="wmrl", seed=0)
        raw, smooth = [], []
        for step in range(40):
            batch = world.sample(rng, step)
            anchors = fusion.select_anchors(batch.group_ids)
            out = fusion.step(
                batch.group_ids, batch.wm_scores, np.where(anchors, batch.real_scores, np.nan)
            )
            raw.append(out.metrics["kappa_raw"])
            smooth.append(out.kappa)
        ax.plot(raw, color=colour, alpha=0.35, lw=1)
        ax.plot(smooth, color=colour, lw=2, label=f"world-model noise {noise}")
        ax.axhline(world.oracle_kappa(rng, batches=50), color=colour, ls="--", lw=1)
    ax.set_xlabel("training step")
    ax.set_ylabel("kappa")
    ax.set_title("kappa per step (thin), smoothed (thick), oracle (dashed)", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(OUT / "fusion_kappa.png", dpi=110)


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    calibration_curve()
    kappa_over_steps()
    print(f"wrote {OUT}/fusion_calibration.png and fusion_kappa.png")
