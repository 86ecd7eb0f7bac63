"""The real-execution saving the bench's quality curve predicts at a world model's quality.

``wmrl bench --full`` measures a quality curve: world models of known within-task Spearman
(the default one and mixtures of it with the real scores) and, for each, how many times
fewer real executions the fused arm needs to reach the level that training on real
executions alone (``real``) reaches at the largest budget. :func:`predicted_saving` reads a
Spearman off that curve (linear between measured points). The default curve is the
committed headline run's ``wmrl`` arm; a user's own ``wmrl bench`` run can replace it
(:func:`curve_from_results`). The prediction carries :data:`CAVEATS`.

Example:
    >>> predicted_saving(0.95)["saving"]
    3.75
    >>> round(predicted_saving(0.75)["saving"], 2)
    1.75
    >>> predicted_saving(0.5)["saving"] is None
    True
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["CAVEATS", "HEADLINE_CURVE", "HEADLINE_SOURCE", "curve_from_results",
           "predicted_saving"]  # fmt: skip

HEADLINE_CURVE: tuple[tuple[float, float], ...] = (
    (0.698, 1.523),
    (0.832, 2.120),
    (0.919, 3.750),
    (0.963, 3.750),
    (1.000, 4.875),
)
"""(within-task Spearman on the run's own groups, saving over ``real`` at 64 executions per
task) of the ``wmrl`` arm in the committed ``wmrl bench --full`` headline: the default world
model, then mixtures 0.5 / 0.75 / 0.9 / 1 with the real scores."""
HEADLINE_SOURCE = (
    "wmrl bench --full (the committed headline: 39 held-out tasks of the ML suite, 6 seeds, "
    "80 rounds, groups of 8, wmrl arm, saving over real at 64 executions per task; "
    "docs/figures/bench_pertask_full/results.json)"
)
CAVEATS: tuple[str, ...] = (
    "The curve was measured on the ML suite's held-out tasks with the bench's tabular policy, "
    "learning rate and budgets; another environment, policy or budget has its own curve "
    "(run wmrl bench on it and pass its results.json).",
    "The curve's Spearman is measured on the training run's own groups (on-policy, with "
    "anchors arriving); this report's is on the held-out executions given: they agree only "
    "as far as those executions resemble what the policy will write.",
    "Few points (5), 6 seeds each, savings are reach-and-stay ratios on seed means: "
    "neighbouring points can tie or cross (0.92 and 0.96 both 3.75x).",
    "Below the curve's lowest Spearman no saving is predicted (it may be none).",
)


def curve_from_results(path: str | os.PathLike[str], arm: str = "wmrl") -> list[tuple]:
    """The (Spearman, saving) points of ``arm`` in a ``wmrl bench`` ``results.json``
    (points whose saving was not reached are left out)."""
    results = json.loads(Path(path).read_text(encoding="utf-8"))
    if "quality_curve" not in results:
        raise ValueError(f"{path} has no quality_curve: run wmrl bench with quality weights")
    points = [
        (float(p["spearman_on_work"]), float(p["saving"]))
        for p in results["quality_curve"]
        if p["arm"] == arm and p["saving"] is not None and p["spearman_on_work"] is not None
    ]
    if len(points) < 2:
        raise ValueError(f"{path}: fewer than 2 points of arm {arm!r} with a saving")
    return sorted(points)


def predicted_saving(
    spearman: float | None, curve: Any = HEADLINE_CURVE, source: str = HEADLINE_SOURCE
) -> dict[str, Any]:
    """The saving the curve predicts at ``spearman`` (``None`` below the curve or without a
    Spearman), with the curve, its source and :data:`CAVEATS`."""
    points = sorted((float(s), float(v)) for s, v in curve)
    x, y = np.array([p[0] for p in points]), np.array([p[1] for p in points])
    saving = None
    if spearman is not None and spearman >= x[0]:
        saving = float(np.interp(spearman, x, y))
    return {
        "spearman": spearman,
        "saving": saving,
        "curve": [list(p) for p in points],
        "source": source,
        "caveats": list(CAVEATS),
    }
