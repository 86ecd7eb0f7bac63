"""Summaries of benchmark runs: final scores with intervals, costs, and the speedup.

**Speedup** of an arm: the real-execution seconds the ``real`` arm needed to reach its final
score, divided by the real-execution seconds the arm needed to reach that same score
(``None``, "not reached", when it never did). Both are read off the seed-averaged curve of
true score against cumulative real-execution seconds, at the evaluated steps. *Reaching*
means staying: the first evaluation from which every later one is at least the target (a
noisy early peak does not count); ``tolerance`` lowers the target by that much.

Example:
    >>> from wmrl_env.bench.records import RunRecord, StepRecord
    >>> def run(arm, seconds, scores):
    ...     steps = [StepRecord(i, real_exec_seconds=t, true_score=s)
    ...              for i, (t, s) in enumerate(zip(seconds, scores))]
    ...     return RunRecord(arm, 0, steps)
    >>> runs = [run("real", [10, 20, 30], [0.2, 0.6, 0.8]), run("wmrl", [1, 2, 3], [0.3, 0.8, 0.8])]
    >>> summary = summarise(runs)
    >>> summary["wmrl"].speedup, summary["real"].speedup
    (15.0, 1.0)
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

from wmrl_env.bench.records import RunRecord

BASELINE = "real"


@dataclass(frozen=True)
class ArmSummary:
    arm: str
    seeds: int
    final_score_mean: float
    final_score_ci: tuple[float, float] | None  # 95 % t-interval over seeds; None for 1 seed
    real_exec_seconds: float  # mean over seeds, whole run
    wall_seconds: float
    wm_seconds: float
    real_executions: float
    seconds_to_target: float | None  # real-execution seconds to reach the baseline's final
    speedup: float | None

    def to_json(self) -> dict:
        data = asdict(self)
        return {k: _json_number(v) for k, v in data.items()}


def mean_curve(runs: Sequence[RunRecord]) -> tuple[np.ndarray, np.ndarray]:
    """Seed-averaged (cumulative real-execution seconds, true score) at the evaluated steps."""
    length = min(len(run.evaluated) for run in runs)
    seconds = np.mean([[s.real_exec_seconds for s in run.evaluated[:length]] for run in runs], 0)
    scores = np.mean([[s.true_score for s in run.evaluated[:length]] for run in runs], 0)
    return seconds, scores


def seconds_to_reach(seconds: np.ndarray, scores: np.ndarray, target: float) -> float | None:
    """Cumulative seconds at the first evaluation from which the score stays >= ``target``.

    >>> seconds_to_reach(np.array([1.0, 2, 3, 4]), np.array([0.1, 0.9, 0.5, 0.9]), 0.8)
    4.0
    """
    below = np.flatnonzero(scores < target - 1e-12)
    first = 0 if below.size == 0 else int(below[-1]) + 1
    return float(seconds[first]) if first < scores.size else None


def confidence_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float] | None:
    """t-interval of the mean, clipped to the normalised score's range [0, 1].

    >>> confidence_interval([0.2, 0.4])[0], confidence_interval([0.0, 1.0])
    (0.0, (0.0, 1.0))
    """
    values = np.asarray(values, dtype=np.float64)
    if values.size < 2:
        return None
    half = stats.t.ppf(0.5 + level / 2, values.size - 1) * values.std(ddof=1) / np.sqrt(values.size)
    return float(max(values.mean() - half, 0.0)), float(min(values.mean() + half, 1.0))


def summarise(runs: Sequence[RunRecord], tolerance: float = 0.0) -> dict[str, ArmSummary]:
    """One :class:`ArmSummary` per arm, in the order the arms first appear."""
    by_arm: dict[str, list[RunRecord]] = defaultdict(list)
    for run in runs:
        by_arm[run.arm].append(run)
    target = None
    if BASELINE in by_arm:
        target = float(np.mean([r.final_true_score for r in by_arm[BASELINE]])) - tolerance
    baseline_seconds = (
        seconds_to_reach(*mean_curve(by_arm[BASELINE]), target) if target is not None else None
    )
    summaries = {}
    for arm, arm_runs in by_arm.items():
        finals = [r.final_true_score for r in arm_runs]
        needed = seconds_to_reach(*mean_curve(arm_runs), target) if target is not None else None
        speedup = None
        if needed is not None and baseline_seconds is not None and needed > 0:
            speedup = baseline_seconds / needed
        summaries[arm] = ArmSummary(
            arm=arm,
            seeds=len(arm_runs),
            final_score_mean=float(np.mean(finals)),
            final_score_ci=confidence_interval(finals),
            real_exec_seconds=float(np.mean([r.totals.real_exec_seconds for r in arm_runs])),
            wall_seconds=float(np.mean([r.totals.wall_seconds for r in arm_runs])),
            wm_seconds=float(np.mean([r.totals.wm_seconds for r in arm_runs])),
            real_executions=float(np.mean([r.totals.real_executions for r in arm_runs])),
            seconds_to_target=needed,
            speedup=speedup,
        )
    return summaries


def markdown_table(summaries: dict[str, ArmSummary]) -> str:
    lines = [
        "| arm | final true score (95 % CI) | real-exec s | real executions | wall s "
        "| world-model s | speedup |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in summaries.values():
        ci = f" [{s.final_score_ci[0]:.3f}, {s.final_score_ci[1]:.3f}]" if s.final_score_ci else ""
        if s.speedup is not None:
            speedup = f"{s.speedup:.2f}x"
        elif s.seconds_to_target == 0:
            speedup = "reached with no real execution"
        else:
            speedup = "not reached"
        lines.append(
            f"| {s.arm} | {s.final_score_mean:.3f}{ci} | {s.real_exec_seconds:.1f} "
            f"| {s.real_executions:.0f} | {s.wall_seconds:.1f} | {s.wm_seconds:.1f} | {speedup} |"
        )
    return "\n".join(lines)


def _json_number(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, tuple):
        return [_json_number(v) for v in value]
    return value
