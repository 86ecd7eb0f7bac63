"""``wmrl bench``: GRPO with real execution vs world model only vs WMRL and its ablations.

:func:`run_bench` trains every arm with every seed (:mod:`wmrl_env.bench.runner`), then
writes into one folder: ``config.json`` (to repeat the run), ``runs.jsonl`` (every step of
every run), ``results.json`` and ``results.md`` (:mod:`wmrl_env.bench.report`) and PNG
figures (:mod:`wmrl_env.bench.plots`). Needs the ``transformers``, ``tasks`` and ``bench``
extras (the world model is a sentence-embedding regressor).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from wmrl_env.bench.config import BenchConfig
from wmrl_env.bench.records import RunRecord, StepRecord
from wmrl_env.bench.report import ArmSummary, markdown_table, summarise

__all__ = ["BenchConfig", "BenchResult", "run_bench"]


@dataclass(frozen=True)
class BenchResult:
    folder: Path
    summaries: dict[str, ArmSummary]
    runs: list[RunRecord]
    seconds: float


def run_bench(
    config: BenchConfig,
    on_step: Callable[[str, int, StepRecord], None] | None = None,
    on_phase: Callable[[str], None] | None = None,
) -> BenchResult:
    """Run every arm and seed; write the outputs; return the summaries."""
    from wmrl_env.bench import plots
    from wmrl_env.bench.runner import real_executor, run_one, true_score_executor
    from wmrl_env.bench.world_model import default_world_model
    from wmrl_env.world_models import TextEncoder

    start = time.perf_counter()
    folder = Path(config.out or f"runs/bench-{time.strftime('%Y%m%d-%H%M%S')}")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config.to_dict(), indent=2) + "\n")
    say = on_phase or (lambda message: None)

    say("fitting the world model on the train tasks' execution table")
    encoder = TextEncoder()  # one embedding cache for every arm's world model
    runs: list[RunRecord] = []
    with (
        real_executor(config) as executor,
        true_score_executor(config, executor) as scorer,
        (folder / "runs.jsonl").open("w") as log,
    ):
        for arm in config.arms:
            for seed in range(config.seeds):
                say(f"arm {arm}, seed {seed}")
                world_model = default_world_model(encoder)  # fresh: it learns from anchors

                def step(record: StepRecord, arm: str = arm, seed: int = seed) -> None:
                    if on_step is not None:
                        on_step(arm, seed, record)

                run = run_one(config, arm, seed, world_model, executor, scorer, on_step=step)
                runs.append(run)
                log.write(json.dumps(run.to_dict()) + "\n")
                log.flush()
    summaries = summarise(runs, tolerance=config.tolerance)
    seconds = time.perf_counter() - start
    results = {
        "arms": {arm: s.to_json() for arm, s in summaries.items()},
        "baseline": "real",
        "tolerance": config.tolerance,
        "bench_seconds": seconds,
    }
    (folder / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    (folder / "results.md").write_text(markdown_table(summaries) + "\n")
    say("plotting")
    plots.write_all(runs, folder)
    return BenchResult(folder, summaries, runs, seconds)
