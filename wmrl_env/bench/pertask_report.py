"""The per-task regime's report: per-task readings bootstrapped over seeds x tasks, paired
gains over ``anchors`` and ``real``, execution savings, the learning-rate sweep and the
quality curve, as JSON-ready dicts and Markdown.

**Intervals.** A reading of an arm is a (seeds x tasks) matrix of per-task scores; its
interval is the 2.5-97.5 % percentile range of the mean over a two-way bootstrap that
resamples seeds and tasks independently (both are random draws: tasks from the suite, seeds
from the run's randomness). A gain is the mean of (arm - baseline) over the same resampled
(seed, task) cells: arms are paired by task and seed.

**Savings.** ``real`` reaches a score ``S_B`` after ``B`` executions per task; an arm's saving
at ``B`` is ``E_real / E_arm``, the executions per task each needs before its seed-averaged
greedy score reaches ``S_B - tolerance`` and stays there (``real``'s ``E_real <= B``).

Example:
    >>> cells = np.array([[0.5, 0.7], [0.6, 0.8]])           # 2 seeds x 2 tasks
    >>> mean, (low, high) = bootstrap_mean(cells, resamples=500, seed=0)
    >>> round(mean, 3), low <= mean <= high
    (0.65, True)
    >>> gain_text(None), gain_text((0.1, (0.02, 0.18)))
    ('n/a', '+0.100 [+0.020, +0.180]')
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from wmrl_env.bench.records import RunRecord
from wmrl_env.bench.report import seconds_to_reach

Interval = tuple[float, tuple[float, float]]


def bootstrap_mean(cells: np.ndarray, resamples: int = 2000, seed: int = 0) -> Interval:
    """Mean of a (seeds x tasks) matrix and its two-way bootstrap 95 % interval."""
    cells = np.asarray(cells, dtype=np.float64)
    if cells.ndim != 2 or cells.size == 0:
        raise ValueError(f"need a non-empty (seeds x tasks) matrix, got shape {cells.shape}")
    rng = np.random.default_rng(seed)
    n_seeds, n_tasks = cells.shape
    means = np.empty(resamples)
    for i in range(resamples):
        rows = rng.integers(n_seeds, size=n_seeds)
        cols = rng.integers(n_tasks, size=n_tasks)
        means[i] = cells[np.ix_(rows, cols)].mean()
    low, high = np.percentile(means, [2.5, 97.5])
    return float(cells.mean()), (float(low), float(high))


def cells_of(runs: Sequence[RunRecord], key: str) -> np.ndarray | None:
    """The (seeds x tasks) matrix of one reading, rows in seed order (None if any run
    lacks it)."""
    ordered = sorted(runs, key=lambda r: r.seed)
    if not ordered or any(key not in r.task_scores for r in ordered):
        return None
    return np.array([r.task_scores[key] for r in ordered])


def paired_gain(
    runs: Sequence[RunRecord], baseline: Sequence[RunRecord], key: str, resamples: int
) -> Interval | None:
    """Mean and interval of (arm - baseline) on the same (seed, task) cells; None when a
    side lacks the reading, the seeds differ, or the arm spends no real execution (its
    gain at equal real cost is not defined)."""
    if sum(r.totals.real_executions for r in runs) == 0:
        return None
    if sorted(r.seed for r in runs) != sorted(r.seed for r in baseline):
        return None
    arm, base = cells_of(runs, key), cells_of(baseline, key)
    if arm is None or base is None or arm.shape != base.shape:
        return None
    return bootstrap_mean(arm - base, resamples)


def saving(
    arm: Sequence[RunRecord],
    real: Sequence[RunRecord],
    budget: int,
    tolerance: float,
    num_tasks: int,
) -> tuple[float | None, float | None]:
    """(saving, executions per task the arm needs) at ``budget`` (see the module doc);
    ``(None, None)`` when the arm never reaches the target, ``(None, 0.0)`` when it needs
    no real execution."""
    real_cells = cells_of(real, f"greedy@exec{budget}")
    if real_cells is None:
        return None, None
    target = float(real_cells.mean()) - tolerance
    needed = {}
    for name, runs in (("real", real), ("arm", arm)):
        length = min(len(r.steps) for r in runs)
        executions = np.mean([[s.real_executions for s in r.steps[:length]] for r in runs], 0)
        scores = np.mean([[s.true_score for s in r.steps[:length]] for r in runs], 0)
        needed[name] = seconds_to_reach(executions / num_tasks, scores, target)
    if needed["arm"] is None:
        return None, None
    if needed["arm"] == 0 or not needed["real"]:
        return None, float(needed["arm"])
    return needed["real"] / needed["arm"], float(needed["arm"])


def summarise_pertask(
    runs: Sequence[RunRecord],
    budgets: Sequence[int],
    num_tasks: int,
    tolerance: float = 0.01,
    resamples: int = 2000,
) -> dict[str, dict]:
    """Per arm label: each reading's mean and interval, the paired gains over ``anchors``
    and ``real`` at every reading, savings at every budget, and the world model's
    within-task Spearman on the work (mean over runs and rounds)."""
    by_arm: dict[str, list[RunRecord]] = defaultdict(list)
    for run in runs:
        by_arm[run.arm].append(run)
    keys = [f"{s}@{a}{b}" for s in ("greedy", "best") for a in ("exec", "sec") for b in budgets]
    keys += ["greedy@final", "best@final"]
    out = {}
    for label, arm_runs in by_arm.items():
        row: dict = {"seeds": len(arm_runs), "readings": {}, "gain_over": {}, "savings": {}}
        for key in keys:
            cells = cells_of(arm_runs, key)
            if cells is not None:
                row["readings"][key] = bootstrap_mean(cells, resamples)
        for baseline in ("anchors", "real"):
            if baseline in by_arm and label != baseline:
                row["gain_over"][baseline] = {
                    key: paired_gain(arm_runs, by_arm[baseline], key, resamples) for key in keys
                }
        if "real" in by_arm:
            for budget in budgets:
                row["savings"][budget] = saving(
                    arm_runs, by_arm["real"], budget, tolerance, num_tasks
                )
        spearman = [s.spearman for r in arm_runs for s in r.steps if not math.isnan(s.spearman)]
        row["spearman_on_work"] = float(np.mean(spearman)) if spearman else None
        row["real_executions_per_task"] = float(
            np.mean([r.totals.real_executions for r in arm_runs]) / num_tasks
        )
        row["real_exec_seconds"] = float(np.mean([r.totals.real_exec_seconds for r in arm_runs]))
        row["wall_seconds"] = float(np.mean([r.totals.wall_seconds for r in arm_runs]))
        out[label] = row
    return out


def interval_text(value: Interval | None, sign: str = "", missing: str = "-") -> str:
    if value is None:
        return missing
    mean, (low, high) = value
    return f"{mean:{sign}.3f} [{low:{sign}.3f}, {high:{sign}.3f}]"


def gain_text(value: Interval | None) -> str:
    """A gain with its interval, or "n/a" (no real execution, or no baseline)."""
    return "n/a" if value is None else interval_text(value, "+")


def markdown(
    summary: dict[str, dict],
    lines: dict[str, Interval],
    budgets: Sequence[int],
    rates: dict[str, float],
    scale: str = "held-out tasks",
) -> str:
    """The report: reference lines, arms at equal real executions (greedy and best executed),
    paired gains, equal seconds and equal rounds, savings; ``scale`` says what the scores
    are read on."""
    head = " | ".join(f"{b} / task" for b in budgets)
    rule = "|---" * (len(budgets) + 1) + "|"
    out = [f"Reference lines ({scale}, 95 % bootstrap interval over tasks):", ""]
    out += ["| line | score |", "|---|---|"]
    out += [f"| {name} | {interval_text(value)} |" for name, value in lines.items()]
    for title, score, axis in (
        ("greedy program's score at equal real executions per task", "greedy", "exec"),
        ("best program executed so far, at equal real executions per task", "best", "exec"),
        ("greedy program's score at equal real seconds (B executions per task at the "
         "table's mean seconds)", "greedy", "sec"),
    ):  # fmt: skip
        out += ["", f"Arms, {title}:", "", f"| arm (rate) | {head} |", rule]
        for label, row in summary.items():
            cells = [
                interval_text(row["readings"].get(f"{score}@{axis}{b}"), missing="not reached")
                for b in budgets
            ]
            out.append(f"| {label} ({_rate(rates, label)}) | {' | '.join(cells)} |")
    for baseline in ("anchors", "real"):
        out += [
            "",
            f"Gain of the greedy score over `{baseline}` at equal real executions per task "
            "(paired by seed and task; n/a: the arm executes nothing):",
            "",
            f"| arm | {head} | at equal rounds |",
            rule + "---|",
        ]
        for label, row in summary.items():
            gains = row["gain_over"].get(baseline)
            if gains is None:
                continue
            cells = [gain_text(gains.get(f"greedy@exec{b}")) for b in budgets]
            out.append(f"| {label} | {' | '.join(cells)} | {gain_text(gains['greedy@final'])} |")
    out += ["", "Equal rounds (mean of the last evaluations) and cost:", ""]
    out += ["| arm | greedy | best executed | real executions / task | real-exec s | wall s |"]
    out += ["|---|---|---|---|---|---|"]
    for label, row in summary.items():
        out.append(
            f"| {label} | {interval_text(row['readings'].get('greedy@final'))} "
            f"| {interval_text(row['readings'].get('best@final'))} "
            f"| {row['real_executions_per_task']:.1f} | {row['real_exec_seconds']:,.0f} "
            f"| {row['wall_seconds']:.1f} |"
        )
    out += [
        "",
        "Real executions saved: `real`'s executions per task to reach its own score "
        "at B (minus the tolerance) / the arm's:",
        "",
        f"| arm | {head} |",
        rule,
    ]
    for label, row in summary.items():
        if row["savings"]:
            out.append(
                f"| {label} | {' | '.join(_saving_text(row['savings'][b]) for b in budgets)} |"
            )
    return "\n".join(out)


def _rate(rates: dict[str, float], label: str) -> str:
    rate = rates.get(label)
    return "-" if rate is None else f"{rate:g}"


def _saving_text(value: tuple[float | None, float | None]) -> str:
    ratio, needed = value
    if ratio is not None:
        return f"{ratio:.2f}x ({needed:.1f} / task)"
    return "no real execution needed" if needed == 0 else "not reached"
