"""Summaries of benchmark runs: final scores with intervals, costs, speedups, the gain over
``anchors``.

**Speedup** of an arm: the real-execution seconds the ``real`` arm needed to reach its final
score, divided by the real-execution seconds the arm needed to reach that same score
(``None``, "not reached", when it never did). Both are read off the seed-averaged curve of
true score against cumulative real-execution seconds, at the evaluated steps. *Reaching*
means staying: the first evaluation from which every later one is at least the target (a
noisy early peak does not count); ``tolerance`` lowers the target by that much. The same
ratio is also reported at 95 % and 90 % of the real arm's final score (``speedup_at``).

**Gain over anchors** (:func:`gain_over_anchors`): per seed, the arm's held-out score minus
the ``anchors`` arm's, both read at the same cumulative real-execution seconds (the smaller
of the two runs' totals; a curve's value at ``s`` seconds is its last evaluation at or
before ``s``), then the mean and 95 % t-interval over seeds. An arm that spends no real
cost (``wm``) has no such gain: it is reported "n/a" (reading it at 0 s would compare its
final score with the anchors arm's untrained start).

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
ANCHORS = "anchors"
SPEEDUP_LEVELS: dict[str, float | None] = {"final": None, "95%": 0.95, "90%": 0.90}
"""speedup targets: the real arm's final score (minus the tolerance), or this share of it"""


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
    real_steps: float  # mean over seeds, whole run (simulators: real control steps)
    seconds_to_target: float | None  # real-execution seconds to reach the baseline's final
    speedup: float | None
    speedup_at: dict[str, float | None]  # SPEEDUP_LEVELS -> speedup
    seconds_at: dict[str, float | None]  # SPEEDUP_LEVELS -> real-execution seconds to reach
    gain_over_anchors: float | None  # mean over seeds; None without an anchors arm
    gain_over_anchors_ci: tuple[float, float] | None

    def to_json(self) -> dict:
        data = asdict(self)
        return {k: _json_number(v) for k, v in data.items()}


COST = "real_exec_seconds"
"""the default real cost curves are read against (any cumulative field of a
:class:`~wmrl_env.bench.records.StepRecord`, e.g. ``"real_steps"`` for simulators)"""


def mean_curve(runs: Sequence[RunRecord], cost: str = COST) -> tuple[np.ndarray, np.ndarray]:
    """Seed-averaged (cumulative real cost, true score) at the evaluated steps."""
    length = min(len(run.evaluated) for run in runs)
    seconds = np.mean([[getattr(s, cost) for s in run.evaluated[:length]] for run in runs], 0)
    scores = np.mean([[s.true_score for s in run.evaluated[:length]] for run in runs], 0)
    return seconds, scores


def score_band(runs: Sequence[RunRecord]) -> tuple[np.ndarray, np.ndarray]:
    """Per evaluation (as in :func:`mean_curve`), the 95 % interval of the score over seeds;
    the mean itself where there is one seed."""
    length = min(len(run.evaluated) for run in runs)
    scores = np.array([[s.true_score for s in run.evaluated[:length]] for run in runs])
    bands = [confidence_interval(column) or (column.mean(), column.mean()) for column in scores.T]
    return np.array([b[0] for b in bands]), np.array([b[1] for b in bands])


def seconds_to_reach(seconds: np.ndarray, scores: np.ndarray, target: float) -> float | None:
    """Cumulative seconds at the first evaluation from which the score stays >= ``target``.

    >>> seconds_to_reach(np.array([1.0, 2, 3, 4]), np.array([0.1, 0.9, 0.5, 0.9]), 0.8)
    4.0
    """
    below = np.flatnonzero(scores < target - 1e-12)
    first = 0 if below.size == 0 else int(below[-1]) + 1
    return float(seconds[first]) if first < scores.size else None


def confidence_interval(
    values: Sequence[float], level: float = 0.95, bounds: tuple[float, float] = (0.0, 1.0)
) -> tuple[float, float] | None:
    """t-interval of the mean, clipped to ``bounds`` (the normalised score's range [0, 1]).

    >>> confidence_interval([0.2, 0.4])[0], confidence_interval([0.0, 1.0])
    (0.0, (0.0, 1.0))
    """
    values = np.asarray(values, dtype=np.float64)
    if values.size < 2:
        return None
    half = stats.t.ppf(0.5 + level / 2, values.size - 1) * values.std(ddof=1) / np.sqrt(values.size)
    return float(max(values.mean() - half, bounds[0])), float(min(values.mean() + half, bounds[1]))


def score_at(run: RunRecord, seconds: float, cost: str = COST) -> float:
    """The run's true score at its last evaluation with at most ``seconds`` cumulative
    real-execution seconds (NaN when it has none).

    >>> from wmrl_env.bench.records import StepRecord
    >>> steps = [StepRecord(i, real_exec_seconds=t, true_score=v)
    ...          for i, (t, v) in enumerate([(0, 0.1), (5, 0.5), (10, 0.9)])]
    >>> score_at(RunRecord("anchors", 0, steps), 7.0)
    0.5
    """
    scores = [s.true_score for s in run.evaluated if getattr(s, cost) <= seconds + 1e-9]
    return scores[-1] if scores else math.nan


def gain_over_anchors(
    runs: Sequence[RunRecord], anchors: Sequence[RunRecord], cost: str = COST
) -> tuple[float | None, tuple[float, float] | None]:
    """Mean and 95 % interval over seeds of (score of ``runs`` - score of ``anchors``) at equal
    cumulative real cost (``cost``); runs are paired by seed."""
    by_seed = {run.seed: run for run in anchors}
    if runs and all(getattr(run.totals, cost) == 0 for run in runs):
        return None, None  # no real cost: a gain at equal real cost is not defined
    gains = []
    for run in runs:
        baseline = by_seed.get(run.seed)
        if baseline is None or not run.evaluated or not baseline.evaluated:
            continue
        seconds = min(getattr(run.evaluated[-1], cost), getattr(baseline.evaluated[-1], cost))
        gains.append(score_at(run, seconds, cost) - score_at(baseline, seconds, cost))
    if not gains:
        return None, None
    return float(np.mean(gains)), confidence_interval(gains, bounds=(-1.0, 1.0))


def summarise(
    runs: Sequence[RunRecord], tolerance: float = 0.0, cost: str = COST
) -> dict[str, ArmSummary]:
    """One :class:`ArmSummary` per arm, in the order the arms first appear; speedups and gains
    are read against ``cost`` (its ``seconds_*`` fields are then in that unit)."""
    by_arm: dict[str, list[RunRecord]] = defaultdict(list)
    for run in runs:
        by_arm[run.arm].append(run)
    targets: dict[str, float] = {}
    if BASELINE in by_arm:
        final = float(np.mean([r.final_true_score for r in by_arm[BASELINE]]))
        targets = {
            level: final - tolerance if share is None else share * final
            for level, share in SPEEDUP_LEVELS.items()
        }
    baseline_curve = mean_curve(by_arm[BASELINE], cost) if targets else None
    summaries = {}
    for arm, arm_runs in by_arm.items():
        finals = [r.final_true_score for r in arm_runs]
        curve = mean_curve(arm_runs, cost)
        speedup_at, seconds_at = {}, {}
        for level, target in targets.items():
            seconds_at[level] = seconds_to_reach(*curve, target)
            speedup_at[level] = _speedup(
                seconds_to_reach(*baseline_curve, target), seconds_at[level]
            )
        gain, gain_ci = (None, None)
        if ANCHORS in by_arm and arm != ANCHORS:
            gain, gain_ci = gain_over_anchors(arm_runs, by_arm[ANCHORS], cost)
        summaries[arm] = ArmSummary(
            arm=arm,
            seeds=len(arm_runs),
            final_score_mean=float(np.mean(finals)),
            final_score_ci=confidence_interval(finals),
            real_exec_seconds=float(np.mean([r.totals.real_exec_seconds for r in arm_runs])),
            wall_seconds=float(np.mean([r.totals.wall_seconds for r in arm_runs])),
            wm_seconds=float(np.mean([r.totals.wm_seconds for r in arm_runs])),
            real_executions=float(np.mean([r.totals.real_executions for r in arm_runs])),
            real_steps=float(np.mean([r.totals.real_steps for r in arm_runs])),
            seconds_to_target=seconds_at.get("final"),
            speedup=speedup_at.get("final"),
            speedup_at=speedup_at,
            seconds_at=seconds_at,
            gain_over_anchors=gain,
            gain_over_anchors_ci=gain_ci,
        )
    return summaries


def _speedup(baseline_seconds: float | None, seconds: float | None) -> float | None:
    if not baseline_seconds or not seconds:  # None, or reached before any real execution
        return None
    return baseline_seconds / seconds


def markdown_table(summaries: dict[str, ArmSummary]) -> str:
    """One row per arm: held-out score, real cost, gain over anchors, speedups, seconds."""
    lines = [
        "| arm | held-out score (95 % CI) | real-exec s | real executions "
        "| gain over anchors at equal real s (95 % CI) | speedup at real's final "
        "| at 95 % | at 90 % | wall s | world-model s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in summaries.values():
        speedups = [
            _speedup_text(s.speedup_at.get(level), s.seconds_at.get(level))
            for level in SPEEDUP_LEVELS
        ]
        lines.append(
            f"| {s.arm} | {s.final_score_mean:.3f}{_interval(s.final_score_ci)} "
            f"| {s.real_exec_seconds:,.0f} | {s.real_executions:,.0f} | {_gain_text(s)} "
            f"| {' | '.join(speedups)} | {s.wall_seconds:.1f} | {s.wm_seconds:.1f} |"
        )
    return "\n".join(lines)


def _interval(ci: tuple[float, float] | None, sign: str = "") -> str:
    return f" [{ci[0]:{sign}.3f}, {ci[1]:{sign}.3f}]" if ci else ""


def _gain_text(s: ArmSummary) -> str:
    if s.gain_over_anchors is None:
        return "(baseline)" if s.arm == ANCHORS else "n/a"
    return f"{s.gain_over_anchors:+.3f}{_interval(s.gain_over_anchors_ci, '+')}"


def _speedup_text(speedup: float | None, seconds: float | None) -> str:
    if speedup is not None:
        return f"{speedup:.2f}x"
    if seconds == 0:
        return "no real execution needed"
    return "not reached"


def _json_number(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (tuple, list)):
        return [_json_number(v) for v in value]
    if isinstance(value, dict):
        return {k: _json_number(v) for k, v in value.items()}
    return value
