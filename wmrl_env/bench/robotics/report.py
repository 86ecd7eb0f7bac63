"""Summaries of the robot bench: the ML bench's (:func:`wmrl_env.bench.report.summarise`,
read against real simulator steps) plus the behaviour-cloned start and each arm's
improvement over it.

**Start**: the base policy's held-out success, one number per seed (step 0 of every run of
that seed), mean and 95 % t-interval over seeds. **Improvement over the start**: per seed, the
arm's final success minus its seed's start, mean and 95 % t-interval over seeds (the issue's
target: an interval that excludes 0 for the ``real`` arm).

Example:
    >>> from wmrl_env.bench.records import RunRecord, StepRecord
    >>> def run(arm, seed, scores):
    ...     steps = [StepRecord(i, real_steps=100 * i, true_score=s) for i, s in enumerate(scores)]
    ...     return RunRecord(arm, seed, steps)
    >>> runs = [run("real", 0, [0.2, 0.5]), run("real", 1, [0.3, 0.5])]
    >>> summary = summarise_robots(runs)
    >>> summary.start, summary.improvement["real"][0]
    (0.25, 0.25)
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from wmrl_env.bench.records import RunRecord
from wmrl_env.bench.report import (
    ArmSummary,
    _gain_text,
    _interval,
    _speedup_text,
    confidence_interval,
    summarise,
)

__all__ = [
    "COST",
    "RobotSummary",
    "markdown",
    "paired_markdown",
    "pass_at",
    "predictor_markdown",
    "references_markdown",
    "summarise_predictor",
    "summarise_robots",
]

COST = "real_steps"


@dataclass(frozen=True)
class RobotSummary:
    arms: dict[str, ArmSummary]
    start: float
    start_ci: tuple[float, float] | None
    improvement: dict[str, tuple[float, tuple[float, float] | None]]
    eval_steps: dict[str, float]  # mean over seeds, whole run

    def to_json(self) -> dict:
        return {
            "arms": {arm: s.to_json() for arm, s in self.arms.items()},
            "start_success": self.start,
            "start_success_ci": self.start_ci,
            "improvement_over_start": {
                arm: {"mean": mean, "ci": ci} for arm, (mean, ci) in self.improvement.items()
            },
            "eval_steps": self.eval_steps,
            "cost": COST,
        }


def summarise_robots(runs: Sequence[RunRecord]) -> RobotSummary:
    """See the module docstring; speedups and gains are read against real steps."""
    starts = {run.seed: run.steps[0].true_score for run in runs}
    by_arm: dict[str, list[RunRecord]] = defaultdict(list)
    for run in runs:
        by_arm[run.arm].append(run)
    improvement = {}
    for arm, arm_runs in by_arm.items():
        deltas = [r.final_true_score - starts[r.seed] for r in arm_runs]
        improvement[arm] = (float(np.mean(deltas)), confidence_interval(deltas, bounds=(-1, 1)))
    start_values = list(starts.values())
    return RobotSummary(
        arms=summarise(runs, cost=COST),
        start=float(np.mean(start_values)),
        start_ci=confidence_interval(start_values),
        improvement=improvement,
        eval_steps={
            arm: float(np.mean([r.totals.eval_steps for r in arm_runs]))
            for arm, arm_runs in by_arm.items()
        },
    )


def markdown(summary: RobotSummary) -> str:
    """One row per arm: success, improvement over the start, real cost, gain, speedups."""
    lines = [
        f"Behaviour-cloned start: {summary.start:.3f}{_interval(summary.start_ci)} "
        "held-out success (mean, 95 % CI over seeds).",
        "",
        "| arm | final success (95 % CI) | over the start (95 % CI) | real steps "
        "| real episodes | sim s | gain over anchors at equal real steps (95 % CI) "
        "| speedup at real's final | at 95 % | at 90 % | wall s | world-model s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for arm, s in summary.arms.items():
        delta, delta_ci = summary.improvement[arm]
        speedups = [
            _speedup_text(s.speedup_at.get(level), s.seconds_at.get(level))
            for level in ("final", "95%", "90%")
        ]
        lines.append(
            f"| {arm} | {s.final_score_mean:.3f}{_interval(s.final_score_ci)} "
            f"| {delta:+.3f}{_interval(delta_ci, '+')} | {s.real_steps:,.0f} "
            f"| {s.real_executions:,.0f} | {s.real_exec_seconds:,.1f} | {_gain_text(s)} "
            f"| {' | '.join(speedups)} | {s.wall_seconds:.0f} | {s.wm_seconds:.1f} |"
        )
    return "\n".join(lines)


def paired_markdown(runs: Sequence[RunRecord], reference: str = "real") -> str:
    """Each arm's final success minus ``reference``'s on the same seeds (the arms of a seed
    share its base policy, starts and held-out starts), mean and 95 % t-interval over the
    seeds both ran, with the mean real steps of each; empty without ``reference`` runs.

    >>> from wmrl_env.bench.records import StepRecord
    >>> def run(arm, seed, final):
    ...     return RunRecord(arm, seed, [StepRecord(0, true_score=0.4),
    ...                                  StepRecord(1, real_steps=100, true_score=final)])
    >>> print(paired_markdown([run("real", 0, 0.5), run("dense", 0, 0.7)]).splitlines()[-1])
    | dense | 1 | +0.200 | 100 | 100 |
    """
    finals: dict[str, dict[int, RunRecord]] = defaultdict(dict)
    for run in runs:
        finals[run.arm][run.seed] = run
    if reference not in finals:
        return ""
    lines = [
        f"Final held-out success minus `{reference}`'s on the same seeds (95 % CI over seeds):",
        "",
        f"| arm | seeds | final minus `{reference}`'s | real steps | `{reference}`'s real steps |",
        "|---|---|---|---|---|",
    ]
    base = finals[reference]
    for arm, by_seed in finals.items():
        seeds = sorted(set(by_seed) & set(base))
        if arm == reference or not seeds:
            continue
        diffs = [by_seed[s].final_true_score - base[s].final_true_score for s in seeds]
        ci = confidence_interval(diffs, bounds=(-1, 1))
        steps = np.mean([by_seed[s].steps[-1].real_steps for s in seeds])
        base_steps = np.mean([base[s].steps[-1].real_steps for s in seeds])
        lines.append(
            f"| {arm} | {len(seeds)} | {np.mean(diffs):+.3f}{_interval(ci, '+')} "
            f"| {steps:,.0f} | {base_steps:,.0f} |"
        )
    return "\n".join(lines)


def pass_at(tries: Sequence[Sequence[bool]]) -> list[float]:
    """Plain search's success: ``tries[j][i]`` is try ``j`` at start ``i``; entry ``k - 1`` is
    the share of starts solved by at least one of the first ``k`` tries.

    >>> pass_at([[True, False, False], [False, False, True]])
    [0.3333333333333333, 0.6666666666666666]
    """
    solved = np.logical_or.accumulate(np.asarray(tries, bool), axis=0)
    return [float(row.mean()) for row in solved]


def references_markdown(references: dict) -> str:
    """The reference lines of ``references.json`` (``benchmarks/robot_references.py``): the
    scripted expert on the held-out starts (the oracle), the behaviour-cloned start greedy
    (the untrained policy) and plain search (its sampled chunks retried per start)."""
    search = references["search"]
    greedy = [row["greedy"] for row in search]
    curves = np.array([row["pass_at"] for row in search])
    steps_per_episode = np.mean([row["steps"] / row["episodes"] for row in search])
    lines = [
        f"Reference lines on the same {references['eval_starts']} held-out starts "
        f"({len(search)} seeds, 95 % CI over seeds):",
        "",
        "| line | held-out success | real episodes per start |",
        "|---|---|---|",
        f"| scripted expert, noise-free (oracle) | {references['oracle']['success']:.3f} | 1 |",
        f"| behaviour-cloned start, greedy (untrained) | {np.mean(greedy):.3f}"
        f"{_interval(confidence_interval(greedy))} | 1 |",
    ]
    for k, column in enumerate(curves.T, start=1):
        lines.append(
            f"| plain search: sampled start, best of {k} (pass@{k}) "
            f"| {column.mean():.3f}{_interval(confidence_interval(list(column)))} | {k} |"
        )
    lines.append("")
    lines.append(
        f"(an episode of the search is {steps_per_episode:.0f} real steps on average; "
        "`real` trains on the real-step count in the arm table, then is scored greedily once "
        "per start)"
    )
    return "\n".join(lines)


def summarise_predictor(rows: Sequence[dict]) -> list[dict]:
    """Per arm, shadow and round, over seeds: real episodes, mean ROC AUC of the world model's
    score on the round's real episodes and on all so far, the same within groups only (seeds
    where both outcomes occurred; rows written before the within-group AUC have none), mean
    Brier score, mean prediction and success rate of the round (``predictor.jsonl``; rows
    without a shadow are the open shadow, the only one before it was an option)."""
    grouped: dict[tuple[str, str, int], list[dict]] = defaultdict(list)
    for row in rows:
        if row.get("round"):
            grouped[(row["arm"], row.get("shadow", "open"), row["step"])].append(row)
    out = []
    for (arm, shadow, step), group in sorted(grouped.items()):

        def mean(part: str, name: str, group: list[dict] = group) -> float:
            values = [r[part].get(name, np.nan) for r in group if r[part]]
            values = [v for v in values if np.isfinite(v)]
            return float(np.mean(values)) if values else float("nan")

        out.append(
            {
                "arm": arm,
                "shadow": shadow,
                "step": step,
                "seeds": len(group),
                "episodes": int(sum(r["round"]["episodes"] for r in group)),
                "auc": mean("round", "auc"),
                "pooled_auc": mean("pooled", "auc"),
                "within_group_auc": mean("round", "within_group_auc"),
                "pooled_within_group_auc": mean("pooled", "within_group_auc"),
                "brier": mean("round", "brier"),
                "mean_prediction": mean("round", "mean_prediction"),
                "success_rate": mean("round", "success_rate"),
                "progress_coverage": mean("round", "progress_coverage"),
                "progress_rmse": mean("round", "progress_rmse"),
                "progress_std": mean("round", "progress_std"),
            }
        )
    return out


def predictor_markdown(summary: Sequence[dict]) -> str:
    """The table of :func:`summarise_predictor`."""
    lines = [
        "World model's score against real success on the policy's own real episodes, per round "
        "(mean over seeds; AUC NaN where a round had one outcome; within-group: only pairs of "
        "episodes from the same start):",
        "",
        "| arm | shadow | round | seeds | real episodes | ROC AUC (round) "
        "| ROC AUC (rounds so far) | within-group AUC (round) | within-group (rounds so far) "
        "| Brier | mean prediction | real success |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in summary:
        lines.append(
            f"| {row['arm']} | {row['shadow']} | {row['step']} | {row['seeds']} "
            f"| {row['episodes']} | {row['auc']:.3f} | {row['pooled_auc']:.3f} "
            f"| {row['within_group_auc']:.3f} "
            f"| {row['pooled_within_group_auc']:.3f} | {row['brier']:.3f} "
            f"| {row['mean_prediction']:.3f} | {row['success_rate']:.3f} |"
        )
    progress = [row for row in summary if np.isfinite(row.get("progress_coverage", np.nan))]
    if progress:
        lines += [
            "",
            "Progress model on the round's real episodes before it learns them (mean over "
            "seeds): RMSE against the progress labels, mean predicted std, share of labels "
            "within one predicted std:",
            "",
            "| arm | round | seeds | RMSE | mean std | within 1 std |",
            "|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {row['arm']} | {row['step']} | {row['seeds']} | {row['progress_rmse']:.3f} "
            f"| {row['progress_std']:.3f} | {row['progress_coverage']:.3f} |"
            for row in progress
        ]
    return "\n".join(lines)
