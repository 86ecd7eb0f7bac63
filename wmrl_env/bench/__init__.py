"""``wmrl bench``: what the world model is worth on the ML task suite, in two regimes.

``--regime pertask`` (the default; :func:`run_pertask_bench`, :mod:`wmrl_env.bench.pertask`):
every held-out task improves from its own executions (a tabular policy per task), with
reference and search lines, each arm at its own tuned learning rate, and the quality curve.

``--regime crosstask`` (:func:`run_bench`): post-train a task-conditioned policy with GRPO
over the ML task suite's ``train`` split, once per arm and seed, and score it on the
``heldout`` split.

Arms: ``real`` (every group executed), ``anchors`` (only the fused arms' share of groups, all
executed, no world model), ``wm``, ``debias``, ``denoise``, ``wmrl``, ``ppi``.
:func:`run_bench` trains every arm with every seed (:mod:`wmrl_env.bench.runner`), optionally
executes a few final programs live (:mod:`wmrl_env.bench.live_check`), then writes into one
folder: ``config.json`` (to repeat the run), ``runs.jsonl`` (every step of every run; a
rerun with the same ``out`` keeps the finished runs there and runs only the missing arms and
seeds, and refuses a folder whose runs were made with another configuration, package version
or world model: :func:`run_fingerprint`),
``results.json`` and ``results.md`` (:mod:`wmrl_env.bench.report`, with the reference
lines of :mod:`wmrl_env.bench.search` and the supervised ceiling of
:mod:`wmrl_env.bench.ceiling`) and PNG figures (:mod:`wmrl_env.bench.plots`). Needs the
``torch``, ``transformers``, ``tasks`` and ``bench`` extras. How much of the table's scores
is its test split: :mod:`wmrl_env.bench.split_stability`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from wmrl_env.bench.config import FUSED_ARMS, BenchConfig
from wmrl_env.bench.live_check import LiveCheck, live_check
from wmrl_env.bench.live_check import markdown as live_markdown
from wmrl_env.bench.pertask_bench import PerTaskResult, run_pertask_bench
from wmrl_env.bench.pertask_config import PerTaskConfig
from wmrl_env.bench.records import RunRecord, StepRecord
from wmrl_env.bench.report import ArmSummary, markdown_table, summarise

__all__ = ["BenchConfig", "BenchResult", "PerTaskConfig", "PerTaskResult", "run_bench",
           "run_fingerprint", "run_pertask_bench"]  # fmt: skip

RESUMABLE_FIELDS = frozenset({"arms", "seeds", "live_check", "tolerance", "workers", "out",
                              "cache_dir"})  # fmt: skip
"""Config fields a finished cross-task run does not depend on (each run is keyed by its arm
and seed; the others only shape the report or where things run): a rerun may change them."""


@dataclass(frozen=True)
class BenchResult:
    folder: Path
    summaries: dict[str, ArmSummary]
    runs: list[RunRecord]
    seconds: float
    live_checks: list[LiveCheck]
    reference_lines: dict[str, float]
    """line name -> mean score over the held-out tasks (oracle, uniform, search, ...)"""


def run_fingerprint(config: BenchConfig) -> dict[str, Any]:
    """What a finished cross-task run of ``config`` was made with: the config fields it
    depends on, the package version and the digest of every file of world model v2 (the
    arms' world model). A rerun into the same folder reuses runs only when this is
    unchanged."""
    from wmrl_env.bench.run_log import fingerprint, world_model_digests

    return fingerprint(config.to_dict(), RESUMABLE_FIELDS, **world_model_digests("v2"))


def run_bench(
    config: BenchConfig,
    on_step: Callable[[str, int, StepRecord], None] | None = None,
    on_phase: Callable[[str], None] | None = None,
) -> BenchResult:
    """Run every arm and seed; write the outputs; return the summaries. Runs already in the
    folder's ``runs.jsonl`` are kept and not run again; a folder whose runs were made with
    another :func:`run_fingerprint` raises :class:`~wmrl_env.bench.run_log.StaleRunLog`
    before anything is written."""
    from wmrl_env.bench import plots
    from wmrl_env.bench.run_log import append_line, read_stamped
    from wmrl_env.bench.runner import Regime, real_executor, run_one

    start = time.perf_counter()
    folder = Path(config.out or f"runs/bench-{time.strftime('%Y%m%d-%H%M%S')}")
    folder.mkdir(parents=True, exist_ok=True)
    made_with = run_fingerprint(config)
    finished = {
        (row["arm"], row["seed"]): RunRecord.from_dict(row)
        for row in read_stamped(folder / "runs.jsonl", made_with)  # refused before any write
    }
    (folder / "config.json").write_text(json.dumps(config.to_dict(), indent=2) + "\n")
    say = on_phase or (lambda message: None)

    import torch

    # the policy's tensors are tiny: intra-op threads only contend with the sandbox and the
    # world model for the cores (measured: 50-190 ms per op at load 10 with the default)
    torch.set_num_threads(1)
    say("reading the task suite: splits, task features, held-out table scores")
    regime = Regime.of_suite(config.train_tasks, config.heldout_tasks)
    make_world_model = _world_models(config, regime.train_tasks)
    runs: list[RunRecord] = []
    with real_executor(config) as executor:
        for arm in config.arms:
            for seed in range(config.seeds):
                if (arm, seed) in finished:
                    say(f"arm {arm}, seed {seed}: finished before, read from runs.jsonl")
                    runs.append(finished[arm, seed])
                    continue
                say(f"arm {arm}, seed {seed}")

                def step(record: StepRecord, arm: str = arm, seed: int = seed) -> None:
                    if on_step is not None:
                        on_step(arm, seed, record)

                world_model = make_world_model(seed)
                run = run_one(config, arm, seed, world_model, executor, regime, on_step=step)
                runs.append(run)
                append_line(folder / "runs.jsonl", {**run.to_dict(), "made_with": made_with})
    summaries = summarise(runs, tolerance=config.tolerance)
    say("reference lines: oracle, uniform, best constant, zero-shot pick, search")
    lines = _reference_lines(config, regime)
    from wmrl_env.bench.ceiling import CEILING_LINE

    ceiling = _supervised_ceiling(regime)
    lines[CEILING_LINE] = ceiling.scores
    checks = []
    if config.live_check:
        say(f"executing {config.live_check} final programs live in the sandbox")
        checks = live_check(_programs_to_check(runs, config.live_check), config.workers)
    seconds = time.perf_counter() - start
    results = {
        "arms": {arm: s.to_json() for arm, s in summaries.items()},
        "baseline": "real",
        "tolerance": config.tolerance,
        "train_tasks": len(regime.train_tasks),
        "heldout_tasks": len(regime.heldout.task_ids),
        "reference_lines": {name: float(np.mean(values)) for name, values in lines.items()},
        "supervised_ceiling": {
            "model": ceiling.model,
            "cv_score_on_train": ceiling.cv_score,
            "cv_scores": ceiling.cv_scores,
        },
        "live_check": [c.to_json() for c in checks],
        "bench_seconds": seconds,
    }
    (folder / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    table = markdown_table(summaries) + "\n\n" + reference_markdown(lines)
    table += (
        f"\n\nSupervised ceiling: {ceiling.model}, chosen by 5-fold cross-validation over the "
        f"train tasks (its picks score {ceiling.cv_score:.3f} there)."
    )
    if checks:
        table += "\n\nLive check:\n\n" + live_markdown(checks)
    (folder / "results.md").write_text(table + "\n")
    say("plotting")
    plots.write_all(runs, folder)
    means = {name: float(np.mean(values)) for name, values in lines.items()}
    return BenchResult(folder, summaries, runs, seconds, checks, means)


SEARCH_BUDGETS = (8, 16, 32)
"""executions per held-out task at which the cross-task report reads the search lines"""


def _reference_lines(config: BenchConfig, regime: Any) -> dict[str, np.ndarray]:
    """The held-out tasks' reference lines (:func:`~wmrl_env.bench.search.reference_lines`)
    with the configured world model, the best constant chosen on the train tasks. The world
    model is v2, as the cross-task arms' (:func:`~wmrl_env.bench.world_model.default_world_model`):
    the package default, v3, was pretrained on the train tasks' real scores."""
    from wmrl_env.bench.bank import TaskBank
    from wmrl_env.bench.pertask_bench import world_model_factory
    from wmrl_env.bench.search import reference_lines
    from wmrl_env.bench.suite import ScoreTable

    bank = TaskBank.of(regime.heldout.task_ids)
    train = ScoreTable.of(regime.train_tasks).scores
    make = world_model_factory(config.world_model, bank, version="v2")
    return reference_lines(bank, make, SEARCH_BUDGETS, train, seeds=1)


def _supervised_ceiling(regime: Any) -> Any:
    """The supervised ceiling on the held-out tasks: a fit of the policy's task features to
    every program's table score on the train tasks (:mod:`~wmrl_env.bench.ceiling`)."""
    from wmrl_env.bench.ceiling import supervised_ceiling
    from wmrl_env.bench.suite import ScoreTable
    from wmrl_env.envs.ml_tasks import get_task

    train_rows = np.stack([regime.features[get_task(t).description] for t in regime.train_tasks])
    train = ScoreTable.of(regime.train_tasks).scores
    folds = min(5, len(regime.train_tasks))
    return supervised_ceiling(
        train_rows, train, regime.heldout_features, regime.heldout.scores, folds=folds
    )


def reference_markdown(lines: dict[str, np.ndarray]) -> str:
    """The reference lines as a Markdown table (mean over the held-out tasks)."""
    rows = [f"| {name} | {float(np.mean(values)):.3f} |" for name, values in lines.items()]
    return "\n".join(["| reference line (held-out tasks) | score |", "|---|---|", *rows])


def _world_models(config: BenchConfig, tasks: tuple[str, ...]) -> Callable[[int], Any]:
    """seed -> a fresh world model of the configured kind (it learns from the run's anchors)
    for the structured programs of ``tasks``."""
    from wmrl_env.bench.world_model import RandomWorldModel, default_world_model

    if config.world_model == "random":
        return lambda seed: RandomWorldModel(seed)
    return lambda seed: default_world_model(tasks)


def _programs_to_check(runs: list[RunRecord], count: int) -> dict[str, str]:
    """The final greedy programs of the first ``count`` held-out tasks, from the first seed of
    the first fused arm (else the first run)."""
    fused = [r for r in runs if r.arm in FUSED_ARMS and r.final_programs]
    source = (fused or [r for r in runs if r.final_programs])[:1]
    if not source:
        return {}
    return dict(list(source[0].final_programs.items())[:count])
