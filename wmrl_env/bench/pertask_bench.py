"""``wmrl bench --regime pertask``: sweep each arm's learning rate on seeds that are not
reported, run every arm at its own rate and at one common rate, the quality curve's dialled
world models, and the reference lines; write the outputs into one folder.

Folder: ``config.json``, ``runs.jsonl`` (one line per run: phase, learning rate, world
model, the :class:`~wmrl_env.bench.records.RunRecord`; a rerun with the same ``out`` reads
the runs already there instead of running them again, and refuses a log made with another
configuration, package version or world-model file), ``results.json``, ``results.md`` and
the figures ``pertask_curves.png`` and ``quality_curve.png``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from wmrl_env.bench.bank import TaskBank
from wmrl_env.bench.pertask import run_arm
from wmrl_env.bench.pertask_config import SUITE_WORLD_MODELS, PerTaskConfig, parse_world_model
from wmrl_env.bench.pertask_report import bootstrap_mean, markdown, summarise_pertask
from wmrl_env.bench.records import RunRecord
from wmrl_env.bench.run_log import append_line, fingerprint, read_stamped, world_model_digests

TUNING_SEED = 1000
"""the sweep's seeds are TUNING_SEED, TUNING_SEED + 1, ...: never among the reported ones"""
COMMON = "@common"
"""label suffix of the common-rate rows"""


@dataclass(frozen=True)
class PerTaskResult:
    folder: Path
    summary: dict[str, dict]
    lines: dict[str, Any]
    rates: dict[str, float]
    quality: list[dict]
    seconds: float
    markdown: str


def world_model_factory(
    spec: str, bank: TaskBank, version: str | None = None
) -> Callable[[int], Any]:
    """seed -> a fresh world model: "default", "random" or "mix:W" (see
    :class:`~wmrl_env.bench.world_model.MixedWorldModel`), built on the package default for
    ML programs, or on ``version`` ("v2", "v3", "v4") when given."""
    from wmrl_env.bench.world_model import MixedWorldModel, RandomWorldModel
    from wmrl_env.world_models import load_default_ml_world_model, load_ml_world_model

    def load() -> Any:
        return load_default_ml_world_model() if version is None else load_ml_world_model(version)

    weight = parse_world_model(spec)
    if spec == "random":
        return lambda seed: RandomWorldModel(seed)
    if weight is None:
        return lambda seed: load()
    truth = bank.truth()
    return lambda seed: MixedWorldModel(load(), truth, weight)


RESUMABLE_FIELDS = frozenset(
    {"arms", "seeds", "tuning_seeds", "learning_rates", "common_rate", "quality_weights",
     "quality_arms", "bootstrap", "tolerance", "last_k", "out"}
)  # fmt: skip
"""Config fields a finished run does not depend on (each run is keyed by its phase, arm,
seed, rate and world model, or they only shape the report): a rerun may change them."""


def run_fingerprint(config: PerTaskConfig) -> dict[str, Any]:
    """What a finished run of ``config`` was made with: the config fields it depends on, the
    package version and the digest of every file the suite's world model loads (its
    artifact, and for v2 and v3 the status model beside it). A rerun into the same folder
    reuses runs only when this is unchanged."""
    version = SUITE_WORLD_MODELS[config.suite] or "v3"  # None: the package default, v3
    return fingerprint(config.to_dict(), RESUMABLE_FIELDS, **world_model_digests(version))


class _RunLog:
    """runs.jsonl: every finished run, keyed by (phase, label, seed, rate, world model) and
    stamped with the :func:`run_fingerprint` it was made with; a log made with another one
    is refused, never mixed in."""

    def __init__(self, path: Path, fingerprint: dict[str, Any]) -> None:
        self.path = path
        self.fingerprint = fingerprint
        self.runs = {
            tuple(row["key"]): RunRecord.from_dict(row["run"])
            for row in read_stamped(path, fingerprint)
        }

    def get(self, key: tuple, make: Callable[[], RunRecord]) -> RunRecord:
        key = tuple(key)
        if key not in self.runs:
            self.runs[key] = make()
            row = {"key": list(key), "run": self.runs[key].to_dict(), "made_with": self.fingerprint}
            append_line(self.path, row)
        return self.runs[key]


def _objective(run: RunRecord, budgets: tuple[int, ...]) -> float:
    """Sweep criterion: mean greedy score over the budgets (the final rounds for an arm that
    executes nothing)."""
    keys = [f"greedy@exec{b}" for b in budgets if f"greedy@exec{b}" in run.task_scores]
    keys = keys or ["greedy@final"]
    return float(np.mean([np.mean(run.task_scores[k]) for k in keys]))


def run_pertask_bench(
    config: PerTaskConfig, on_phase: Callable[[str], None] | None = None
) -> PerTaskResult:
    """Run the per-task regime (see the module doc); returns its summary and writes it."""
    from wmrl_env.bench.suite import ScoreTable, sample_tasks, split_tasks

    say = on_phase or (lambda message: None)
    start = time.perf_counter()
    folder = Path(config.out or f"runs/bench-pertask-{time.strftime('%Y%m%d-%H%M%S')}")
    folder.mkdir(parents=True, exist_ok=True)
    log = _RunLog(folder / "runs.jsonl", run_fingerprint(config))  # refused before any write
    (folder / "config.json").write_text(json.dumps(config.to_dict(), indent=2) + "\n")
    if config.suite == "pool":
        from wmrl_env.bench.pool_suite import pool_bank

        say("reading the pool table: validation (reward) and private (deploy) scores")
        bank = pool_bank()
        bank = pool_bank(task_ids=sample_tasks(bank.task_ids, config.heldout_tasks))
    else:
        say("reading the held-out tasks and their table scores")
        bank = TaskBank.of(sample_tasks(split_tasks("heldout"), config.heldout_tasks))
    version = SUITE_WORLD_MODELS[config.suite]
    make = world_model_factory(config.world_model, bank, version)

    def run(phase: str, arm: str, seed: int, rate: float, spec: str, label: str) -> RunRecord:
        factory = make if spec == config.world_model else world_model_factory(spec, bank, version)
        key = (phase, label, seed, rate, spec)
        return log.get(key, lambda: run_arm(bank, config, arm, seed, rate, factory(seed), label))

    say(f"learning-rate sweep on seeds {TUNING_SEED}+ (not reported)")
    sweep: dict[str, dict[float, float]] = {}
    for arm in config.arms:
        sweep[arm] = {
            rate: float(np.mean([
                _objective(run("tune", arm, TUNING_SEED + s, rate, config.world_model, arm),
                           config.budgets)
                for s in range(config.tuning_seeds)
            ]))
            for rate in config.learning_rates
        }  # fmt: skip
    rates = {arm: max(scores, key=scores.get) for arm, scores in sweep.items()}
    runs: list[RunRecord] = []
    for arm in config.arms:
        say(f"arm {arm} at rate {rates[arm]:g}, {config.seeds} seeds")
        runs += [
            run("main", arm, s, rates[arm], config.world_model, arm) for s in range(config.seeds)
        ]
    common = rates.get("anchors", config.learning_rates[len(config.learning_rates) // 2])
    if config.common_rate:
        for arm in config.arms:
            label = arm + COMMON
            rates[label] = common
            say(f"arm {arm} at the common rate {common:g}")
            for s in range(config.seeds):
                if rates[arm] == common:  # the same run: read it under the common label
                    same = run("main", arm, s, common, config.world_model, arm)
                    runs.append(RunRecord.from_dict({**same.to_dict(), "arm": label}))
                else:
                    runs.append(run("common", arm, s, common, config.world_model, label))
    quality_runs: dict[float, list[RunRecord]] = {}
    for weight in config.quality_weights:
        spec = f"mix:{weight:g}"
        for arm in config.quality_arms:
            rate = rates.get(arm, common)
            say(f"quality curve: {arm} with world model {spec}")
            quality_runs.setdefault(weight, []).extend(
                run("quality", arm, s, rate, spec, f"{arm}@{spec}") for s in range(config.seeds)
            )
    if config.suite == "pool":
        from wmrl_env.bench.pool_suite import noise_ceiling, pool_lines, pretraining_constant

        say(
            "reference lines on private scores: the pool's best, validation, random and "
            "world-model search"
        )
        search_seeds = min(3, config.seeds) if config.world_model == "random" else 1
        raw_lines = pool_lines(
            bank,
            config.budgets,
            world_model=make,
            search_seeds=search_seeds,
            constant=pretraining_constant(bank),
        )
        ceiling = dict(zip(bank.task_ids, noise_ceiling(bank).tolist(), strict=True))
    else:
        say("reference lines: search with and without the world model")
        from wmrl_env.bench.search import reference_lines

        train = ScoreTable.of(split_tasks("train")).scores
        # the default and dialled world models are deterministic: one search run says it all
        search_seeds = min(3, config.seeds) if config.world_model == "random" else 1
        raw_lines = reference_lines(bank, make, config.budgets, train, seeds=search_seeds)
        ceiling = {}
    lines = {name: bootstrap_mean(values[None, :], config.bootstrap) for name, values in
             raw_lines.items()}  # fmt: skip
    summary = summarise_pertask(
        runs, config.budgets, bank.num_tasks, config.tolerance, config.bootstrap
    )
    quality = quality_curve(summary, quality_runs, runs, config, bank.num_tasks)
    text = markdown(summary, lines, config.budgets, rates, _scale(config))
    per_task = per_task_lines(raw_lines, bank.task_ids) if ceiling else {}
    if ceiling:
        text += "\n\n" + ceiling_markdown(ceiling, per_task)
    text += "\n\n" + quality_markdown(quality, config.budgets[-1])
    text += "\n\n" + sweep_markdown(sweep, rates)
    seconds = time.perf_counter() - start
    results = {
        "regime": "pertask",
        "suite": config.suite,
        "policy": config.policy,
        "tasks": list(bank.task_ids),
        "rates": rates,
        "sweep": {arm: {f"{r:g}": v for r, v in s.items()} for arm, s in sweep.items()},
        "reference_lines": {name: _pair(value) for name, value in lines.items()},
        "noise_ceiling": ceiling,
        "per_task_lines": per_task,
        "arms": summary,
        "quality_curve": quality,
        "bench_seconds": seconds,
    }
    (folder / "results.json").write_text(json.dumps(_jsonable(results), indent=2) + "\n")
    (folder / "results.md").write_text(text + "\n")
    say("plotting")
    from wmrl_env.bench import pertask_plots as plots

    plots.pertask_curves(runs, raw_lines, config.budgets, folder / "pertask_curves.png")
    if quality:
        plots.quality_curve(quality, folder / "quality_curve.png")
    return PerTaskResult(folder, summary, lines, rates, quality, seconds, text)


def _scale(config: PerTaskConfig) -> str:
    if config.suite == "pool":
        return (
            "pool suite: every score on the private test, trivial baseline 0, the pool's best "
            "program 1; rewards read validation scores; policies choose among the pool's "
            "programs; the best executed program is the best by validation"
        )
    return "held-out tasks"


def quality_curve(
    summary: dict[str, dict],
    quality_runs: dict[float, list[RunRecord]],
    runs: list[RunRecord],
    config: PerTaskConfig,
    num_tasks: int,
) -> list[dict]:
    """One point per (world model, arm): its within-task Spearman measured on the run's own
    groups, its saving over ``real`` and gain over ``anchors`` at the largest budget; the
    configured world model's own runs are the first points."""
    baselines = [r for r in runs if r.arm in ("real", "anchors")]
    budget = config.budgets[-1]
    points = []
    sources = [(config.world_model, [r for r in runs if r.arm in config.quality_arms])]
    sources += [(f"mix:{w:g}", group) for w, group in quality_runs.items()]
    for spec, group in sources:
        if not group:
            continue
        rows = summarise_pertask(
            group + baselines, config.budgets, num_tasks, config.tolerance, config.bootstrap
        )
        for label, row in rows.items():
            if label in ("real", "anchors"):
                continue
            ratio, needed = row["savings"].get(budget, (None, None))
            points.append({
                "world_model": spec,
                "arm": label.split("@")[0],
                "spearman_on_work": row["spearman_on_work"],
                "saving": ratio,
                "executions_needed": needed,
                "score": row["readings"].get(f"greedy@exec{budget}"),
                "gain_over_anchors": row["gain_over"].get("anchors", {}).get(
                    f"greedy@exec{budget}"
                ),
            })  # fmt: skip
    return points


HEADROOM_LINES = {
    "best constant program": "best constant",
    "world model's zero-shot pick": "zero-shot pick",
    "random search@16": "random search@16",
    "exhaustive validation search": "validation search",
}
"""the reference lines whose per-task private scores the noise-ceiling table shows (a line
is matched by the start of its name) and their column titles there"""


def per_task_lines(lines: dict[str, np.ndarray], task_ids: Sequence[str]) -> dict[str, dict]:
    """Per task, the private score of each of :data:`HEADROOM_LINES` the run holds: the
    pool's best is 1, so ``1 - value`` is the headroom over that line."""
    chosen = {}
    for prefix in HEADROOM_LINES:
        name = next((n for n in lines if n.startswith(prefix)), None)
        if name is not None:
            chosen[name] = dict(zip(task_ids, np.asarray(lines[name], float).tolist(), strict=True))
    return chosen


def ceiling_markdown(ceiling: dict[str, float], per_task: dict[str, dict] | None = None) -> str:
    """The noise ceiling: each task's validation-private Spearman over its pool, and their
    mean (tasks where it is undefined left out); beside it, each task's private score of the
    lines in ``per_task`` (:func:`per_task_lines`) and their mean."""
    per_task = per_task or {}
    values = np.array(list(ceiling.values()), dtype=float)
    out = [
        "Noise ceiling (within-task Spearman between the pool's validation and private scores: "
        "how well the reward itself ranks what a user deploys; a failed execution is 0 in "
        "both): mean "
        f"{np.nanmean(values):.3f} over {int(np.isfinite(values).sum())} tasks. Beside it, "
        "each task's private score of the reference lines (the pool's best is 1: one minus "
        "a value is the headroom over that line)",
        "",
        "| task | Spearman | " + " | ".join(_column_title(name) for name in per_task) + " |",
        "|---" * (len(per_task) + 2) + "|",
    ]
    for task, value in ceiling.items():
        cells = "".join(f" {line[task]:.3f} |" for line in per_task.values())
        out.append(f"| {task} | {value:.3f} |{cells}")
    means = "".join(f" {np.mean(list(line.values())):.3f} |" for line in per_task.values())
    out.append(f"| mean | {np.nanmean(values):.3f} |{means}")
    return "\n".join(out)


def _column_title(line: str) -> str:
    return next(title for prefix, title in HEADROOM_LINES.items() if line.startswith(prefix))


def quality_markdown(points: list[dict], budget: int) -> str:
    from wmrl_env.bench.pertask_report import gain_text, interval_text

    out = [
        f"Quality curve (world model within-task Spearman, measured on the run's own groups, "
        f"vs real executions saved to reach `real`'s score at {budget} per task):",
        "",
        "| world model | arm | Spearman | saving | greedy score | gain over anchors |",
        "|---|---|---|---|---|---|",
    ]
    for p in points:
        saving = "not reached" if p["saving"] is None else f"{p['saving']:.2f}x"
        if p["saving"] is None and p["executions_needed"] == 0:
            saving = "no real execution needed"
        spearman = "-" if p["spearman_on_work"] is None else f"{p['spearman_on_work']:.2f}"
        out.append(
            f"| {p['world_model']} | {p['arm']} | {spearman} | {saving} "
            f"| {interval_text(p['score'])} | {gain_text(p['gain_over_anchors'])} |"
        )
    return "\n".join(out)


def sweep_markdown(sweep: dict[str, dict[float, float]], rates: dict[str, float]) -> str:
    grid = sorted({r for scores in sweep.values() for r in scores})
    out = [
        "Learning-rate sweep (tuning seeds, never reported; mean greedy score over the "
        "budgets; the chosen rate in bold):",
        "",
        "| arm | " + " | ".join(f"{r:g}" for r in grid) + " |",
        "|---" * (len(grid) + 1) + "|",
    ]
    for arm, scores in sweep.items():
        cells = [
            (f"**{scores[r]:.3f}**" if r == rates[arm] else f"{scores[r]:.3f}") if r in scores
            else "-" for r in grid
        ]  # fmt: skip
        out.append(f"| {arm} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def _pair(value):
    mean, (low, high) = value
    return {"mean": mean, "ci": [low, high]}


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not np.isfinite(value):
        return None
    if isinstance(value, np.generic):
        return value.item()
    return value
