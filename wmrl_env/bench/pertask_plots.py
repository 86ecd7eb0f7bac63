"""The per-task regime's figures: score against real executions per task with the search
and reference lines, and the quality curve (executions saved against world-model Spearman).

Needs matplotlib (``pip install 'wmrl-env[bench]'``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from wmrl_env.bench.plots import _pyplot
from wmrl_env.bench.records import RunRecord

FIXED_LINES = ("oracle", "best constant", "world model's zero-shot", "pool's best", "exhaustive")


def pertask_curves(
    runs: Sequence[RunRecord],
    lines: dict[str, np.ndarray],
    budgets: Sequence[int],
    path: Path,
) -> None:
    """Greedy score (left) and best executed program (right) against real executions per
    task (log), each arm's seed mean, the search lines at the budgets, the fixed lines."""
    plt = _pyplot()
    by_arm: dict[str, list[RunRecord]] = defaultdict(list)
    for run in runs:
        if "@" not in run.arm:  # the common-rate and quality-curve rows stay in the tables
            by_arm[run.arm].append(run)
    num_tasks = len(next(iter(runs)).task_scores.get("greedy@final", [1])) if runs else 1
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    for ax, field, title in zip(
        axes,
        ("true_score", "best_executed_score"),
        ("greedy program's score", "best program executed so far"),
        strict=True,
    ):
        for arm, arm_runs in by_arm.items():
            length = min(len(r.steps) for r in arm_runs)
            x = np.mean([[s.real_executions for s in r.steps[:length]] for r in arm_runs], 0)
            y = np.mean([[getattr(s, field) for s in r.steps[:length]] for r in arm_runs], 0)
            if x[-1] == 0:  # no real execution (wm): its score, as a level
                ax.axhline(y[-1], lw=1.5, ls="-.", color="C7", label=f"{arm} (no execution)")
                continue
            ax.plot(np.maximum(x / num_tasks, 0.5), y, label=arm, lw=1.5)
        for name, style in (("random search", "k--"), ("world-model search", "k-")):
            if f"{name}@{budgets[0]}" not in lines:  # a suite without a world model
                continue
            values = [float(np.mean(lines[f"{name}@{b}"])) for b in budgets]
            ax.plot(budgets, values, style, marker="o", lw=1, label=name)
        for name, values in lines.items():
            if any(name.startswith(prefix) for prefix in FIXED_LINES):
                ax.axhline(float(np.mean(values)), ls=":", lw=0.8, color="grey")
                ax.text(0.55, float(np.mean(values)), name.split(",")[0][:28], fontsize=7)
        ax.set_xscale("log")
        ax.set_xlabel("real executions per task (log; 0 drawn at 0.5)")
        ax.set_title(title, fontsize=10)
        ax.set_xlim(0.5, max(budgets) * 1.5)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("held-out score (mean over tasks and seeds)")
    axes[1].legend(fontsize=7, loc="lower right")
    fig.suptitle("Per-task regime: score against real executions")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def quality_curve(points: Sequence[dict], path: Path) -> None:
    """Saving over ``real`` against the world model's within-task Spearman, per arm; the
    configured (first) world model circled."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    first = points[0]["world_model"] if points else None
    for i, arm in enumerate(dict.fromkeys(p["arm"] for p in points)):
        mine = [p for p in points if p["arm"] == arm and p["spearman_on_work"] is not None]
        mine.sort(key=lambda p: p["spearman_on_work"])
        x = [p["spearman_on_work"] for p in mine]
        y = [p["saving"] if p["saving"] is not None else np.nan for p in mine]
        ax.plot(x, y, marker="o", color=f"C{i}", label=arm)
        for p in mine:
            if p["world_model"] == first and p["saving"] is not None:
                ax.scatter([p["spearman_on_work"]], [p["saving"]], s=150, facecolors="none",
                           edgecolors=f"C{i}")  # fmt: skip
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xlabel("world model's within-task Spearman (measured on the run's groups)")
    ax.set_ylabel("real executions saved vs `real` (x)")
    ax.set_title(f"Quality curve (circled: {first}; missing: never reached)", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
