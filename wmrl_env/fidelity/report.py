"""The fidelity report's files: ``fidelity.json`` for scripts, ``fidelity.png`` for people.

The plot has four panels read at a glance: the status confusion (real rows, predicted
columns), the failure probability's reliability (predicted vs observed failure share), the
score given ok against the real score with the share inside +-2 std, and the bench's quality
curve with this world model's Spearman and predicted saving marked. It needs matplotlib
(``pip install 'wmrl-env[bench]'``); without it the JSON is still written.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from wmrl_env.fidelity.measure import Fidelity
from wmrl_env.utils.imports import require
from wmrl_env.world_models.outcomes import STATUSES

__all__ = ["headline", "write_json", "write_plot"]


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (np.floating, float)):
        return None if not math.isfinite(float(value)) else float(value)
    if isinstance(value, np.integer):
        return int(value)
    return value


def write_json(result: Fidelity, path: str | Path) -> Path:
    """The figures as JSON (NaN written as null)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_plain(result.figures), indent=2) + "\n")
    return path


def _number(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def headline(figures: dict[str, Any]) -> str:
    """The report in a few lines of text (what the CLI prints)."""
    status, score = figures["status"], figures["score"]
    spearman, saving = figures["within_group_spearman"], figures["predicted_saving"]
    ceiling = figures["noise_ceiling"]
    ceiling_text = (
        _number(ceiling["spearman"]) if ceiling["spearman"] is not None else ceiling["reason"]
    )
    saving_text = f"{saving['saving']:.2f}x" if saving["saving"] is not None else "none predicted"
    return "\n".join([
        f"{figures['world_model']} on {figures['cases']} executions of {figures['tasks']} tasks "
        f"({figures['source']}), {figures['anchor_groups']} anchor groups per task",
        f"status accuracy {_number(status['accuracy'])} (majority "
        f"{_number(status['majority_accuracy'])}), failure AUC {_number(status['failure_auc'])}, "
        f"failure calibration error {_number(status['failure_calibration_error'])}",
        f"score MAE {_number(score['mae'])}, +-1 std {_number(score['coverage_1sd'])}, "
        f"+-2 std {_number(score['coverage_2sd'])}, std calibration error "
        f"{_number(score['std_calibration_error'])}",
        f"within-group Spearman {_number(spearman['mean'])} ({spearman['groups']} groups of "
        f"{figures['group_size']}), noise ceiling: {ceiling_text}",
        f"real-execution saving the bench's quality curve predicts: {saving_text} "
        "(see caveats in the JSON)",
    ])  # fmt: skip


def write_plot(result: Fidelity, path: str | Path) -> Path:
    """The four-panel figure (see the module doc)."""
    matplotlib = require("matplotlib", "the fidelity plot")
    matplotlib.use("Agg")
    plt = require("matplotlib.pyplot", "the fidelity plot")
    figures, outcome, cases = result.figures, result.outcome, result.cases
    fig, axes = plt.subplots(2, 2, figsize=(11, 9))
    fig.suptitle(headline(figures).split("\n", 1)[0], fontsize=9)

    ax = axes[0, 0]
    predicted = outcome.status()
    matrix = np.array([[np.sum((cases.status == r) & (predicted == p)) for p in STATUSES]
                       for r in STATUSES])  # fmt: skip
    ax.imshow(np.log1p(matrix), cmap="Blues")
    for (i, j), count in np.ndenumerate(matrix):
        ax.text(j, i, str(count), ha="center", va="center", fontsize=8)
    short = [s.replace("_", "\n") for s in STATUSES]
    ax.set_xticks(range(len(STATUSES)), short, fontsize=7)
    ax.set_yticks(range(len(STATUSES)), short, fontsize=7)
    ax.set_xlabel("predicted status")
    ax.set_ylabel("real status")
    status = figures["status"]
    ax.set_title(f"status accuracy {_number(status['accuracy'])}, "
                 f"failure AUC {_number(status['failure_auc'])}", fontsize=9)  # fmt: skip

    ax = axes[0, 1]
    failed = cases.status != "ok"
    bins = np.minimum((outcome.p_fail * 10).astype(int), 9)
    centres, observed, sizes = [], [], []
    for b in range(10):
        members = bins == b
        if members.any():
            centres.append(outcome.p_fail[members].mean())
            observed.append(failed[members].mean())
            sizes.append(members.sum())
    ax.plot([0, 1], [0, 1], color="grey", lw=1, ls="--")
    ax.scatter(centres, observed, s=20 + 200 * np.array(sizes) / max(sizes), color="C3")
    ax.set_xlabel("predicted failure probability")
    ax.set_ylabel("observed failure share")
    ax.set_title("failure calibration error "
                 f"{_number(status['failure_calibration_error'])}", fontsize=9)  # fmt: skip

    ax = axes[1, 0]
    ok = (cases.status == "ok") & np.isfinite(outcome.score)
    score = figures["score"]
    if ok.any():
        err = np.abs(outcome.score[ok] - cases.score[ok])
        inside = err <= 2 * np.nan_to_num(outcome.std[ok], nan=0.0)
        ax.scatter(outcome.score[ok][inside], cases.score[ok][inside], s=4, alpha=0.4,
                   color="C0", label="inside +-2 std")  # fmt: skip
        ax.scatter(outcome.score[ok][~inside], cases.score[ok][~inside], s=4, alpha=0.6,
                   color="C1", label="outside")  # fmt: skip
        ax.legend(fontsize=7, loc="lower right")
    ax.plot([0, 1], [0, 1], color="grey", lw=1, ls="--")
    ax.set_xlabel("predicted score given ok")
    ax.set_ylabel("real score (ok runs)")
    ax.set_title(f"MAE {_number(score['mae'])}, +-1 std {_number(score['coverage_1sd'])}, "
                 f"+-2 std {_number(score['coverage_2sd'])}", fontsize=9)  # fmt: skip

    ax = axes[1, 1]
    saving = figures["predicted_saving"]
    curve = np.array(saving["curve"])
    ax.plot(curve[:, 0], curve[:, 1], "o-", color="grey", label="bench quality curve")
    spearman = figures["within_group_spearman"]["mean"]
    if spearman is not None:
        ax.axvline(spearman, color="C2", lw=1.5, label=f"this model: {spearman:.2f}")
    ceiling = figures["noise_ceiling"]["spearman"]
    if ceiling is not None:
        ax.axvline(ceiling, color="k", lw=1, ls=":", label=f"noise ceiling: {ceiling:.2f}")
    if saving["saving"] is not None:
        ax.plot([spearman], [saving["saving"]], "*", color="C2", markersize=14)
    ax.set_xlabel(f"within-group Spearman (groups of {figures['group_size']})")
    ax.set_ylabel("real executions saved (x)")
    text = "none predicted" if saving["saving"] is None else f"{saving['saving']:.2f}x"
    ax.set_title(f"predicted saving {text} (caveats in the JSON)", fontsize=9)
    ax.legend(fontsize=7, loc="upper left")

    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
