"""``wmrl bench --domain robosuite``: GRPO post-training of a behaviour-cloned robot policy on
binary success, in the bench's arms, accounted in real simulator steps and seconds.

For every seed: the base policy and its demonstrations (:mod:`.start`; the world model is
pretrained on them and its success predictors measured), the base policy's success on the
fixed held-out starts (once, shared by the arms), then every arm (:mod:`.runner`). Writes into
one folder: ``config.json``, ``runs.jsonl`` (one line per finished run, appended: a bench
started again with the same folder skips the runs it holds, so it resumes, and several
processes can each run some seeds into it; a folder whose runs or seeds were made with another
configuration, package or simulator version is refused, :func:`run_fingerprint`),
``seeds.jsonl`` (per seed: start success, success-predictor AUCs on held-out demonstrations),
``predictor.jsonl`` (per arm, seed and round: the world model's ROC AUC and calibration on the
policy's own real episodes, :mod:`.predictor_check`, written with the run),
``evaluations.jsonl`` (per-start outcomes of every evaluation, for paired power analyses),
``results.json`` / ``results.md`` (:mod:`.report`) and PNG figures.
Needs the ``robosuite``, ``torch`` and ``bench`` extras.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from wmrl_env.bench.records import RunRecord, StepRecord
from wmrl_env.bench.robotics.config import RobotBenchConfig
from wmrl_env.bench.robotics.report import (
    RobotSummary,
    markdown,
    paired_markdown,
    predictor_markdown,
    references_markdown,
    summarise_predictor,
    summarise_robots,
)
from wmrl_env.bench.run_log import append_line, fingerprint, read_lines, read_stamped

__all__ = ["RobotBenchConfig", "RobotBenchResult", "run_fingerprint", "run_robot_bench",
           "write_report"]  # fmt: skip

RESUMABLE_FIELDS = frozenset({"arms", "seeds", "first_seed", "cache_dir", "out"})
"""Config fields a finished run does not depend on (runs are keyed by arm and seed; the
base-policy cache is keyed by task, seed and recipe): a rerun may change them."""


@dataclass(frozen=True)
class RobotBenchResult:
    folder: Path
    summary: RobotSummary
    runs: list[RunRecord]
    seconds: float


def _read_lines(path: Path) -> list[dict]:
    return [row for _, row in read_lines(path)]


def run_fingerprint(config: RobotBenchConfig) -> dict[str, Any]:
    """What a finished run of ``config`` was made with: the config fields it depends on, the
    package version and the simulator's (robosuite, MuJoCo). A rerun into the same folder
    reuses runs and seeds only when this is unchanged."""
    from importlib.metadata import version

    simulator = {name: version(name) for name in ("robosuite", "mujoco")}
    return fingerprint(config.to_dict(), RESUMABLE_FIELDS, simulator=simulator)


def run_robot_bench(
    config: RobotBenchConfig,
    on_step: Callable[[str, int, StepRecord], None] | None = None,
    on_phase: Callable[[str], None] | None = None,
) -> RobotBenchResult:
    """Run every arm and seed not already in the folder; write the outputs. A folder whose
    runs were made with another :func:`run_fingerprint` raises
    :class:`~wmrl_env.bench.run_log.StaleRunLog` before anything is written."""
    import torch

    from wmrl_env.bench.robotics.evaluation import Evaluator
    from wmrl_env.bench.robotics.runner import run_one
    from wmrl_env.bench.robotics.start import prepare_seed

    torch.set_num_threads(1)  # tiny policy tensors: threads only contend with the simulator
    began = time.perf_counter()
    folder = Path(config.out or f"runs/robot-bench-{time.strftime('%Y%m%d-%H%M%S')}")
    folder.mkdir(parents=True, exist_ok=True)
    made_with = run_fingerprint(config)
    done = {(r["arm"], r["seed"]) for r in read_stamped(folder / "runs.jsonl", made_with)}
    seeds_done = {row["seed"]: row for row in read_stamped(folder / "seeds.jsonl", made_with)}
    (folder / f"config-seed{config.first_seed}.json").write_text(
        json.dumps(config.to_dict(), indent=2) + "\n"
    )
    say = on_phase or (lambda message: None)
    for seed in config.seed_list:
        todo = [arm for arm in config.arms if (arm, seed) not in done]
        if not todo:
            continue
        say(f"seed {seed}: base policy, demonstrations, world-model check")
        start = prepare_seed(config, seed)
        evaluator = Evaluator(config.task, start.horizon, start.eval_seeds)
        try:
            if seed in seeds_done:
                start_success = seeds_done[seed]["start_success"]
            else:
                say(f"seed {seed}: base policy on {len(start.eval_seeds)} held-out starts")
                start_success = evaluator.success(_policy(config, seed))
                start_outcomes = evaluator.outcomes
                auc = start.predictor_auc
                append_line(
                    folder / "seeds.jsonl",
                    {
                        "seed": seed,
                        "start_success": start_success,
                        "start_eval_steps": evaluator.steps,
                        "start_outcomes": start_outcomes,
                        "predictor_auc": asdict(auc) if auc else None,
                        "demo_episodes": int(start.demos.num_episodes),
                        "demo_success": float(start.demos.episode_success.mean()),
                        "made_with": made_with,
                    },
                )
            for arm in todo:
                say(f"arm {arm}, seed {seed}")

                def step(record: StepRecord, arm: str = arm, seed: int = seed) -> None:
                    if on_step is not None:
                        on_step(arm, seed, record)

                details: list[tuple[str, dict]] = []
                run = run_one(
                    config, arm, start, evaluator, start_success, on_step=step,
                    on_detail=lambda name, row, held=details: held.append((name, row)),
                )  # fmt: skip
                for name, row in details:
                    append_line(folder / f"{name}.jsonl", row)
                append_line(folder / "runs.jsonl", {**run.to_dict(), "made_with": made_with})
        finally:
            evaluator.close()
            start.task_envs.close()
    summary, runs = write_report(folder)
    return RobotBenchResult(folder, summary, runs, time.perf_counter() - began)


def _policy(config: RobotBenchConfig, seed: int):
    from wmrl_env.bench.robotics.start import base_policy

    return base_policy(config, seed)[0]


def write_report(folder: Path) -> tuple[RobotSummary, list[RunRecord]]:
    """results.json, results.md and the figures from every run in ``folder``/runs.jsonl."""
    from wmrl_env.bench import plots

    runs = [RunRecord.from_dict(row) for row in _read_lines(folder / "runs.jsonl")]
    if not runs:
        raise ValueError(f"{folder}/runs.jsonl holds no finished run")
    summary = summarise_robots(runs)
    seeds = [{k: v for k, v in row.items() if k != "made_with"}
             for row in _read_lines(folder / "seeds.jsonl")]  # fmt: skip
    checks = summarise_predictor(_read_lines(folder / "predictor.jsonl"))
    results = {**summary.to_json(), "seeds": seeds, "runs": len(runs), "predictor": checks}
    (folder / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    aucs = [s["predictor_auc"] for s in seeds if s.get("predictor_auc")]
    text = markdown(summary)
    paired = paired_markdown(runs)
    if paired:
        text += "\n\n" + paired
    if aucs:
        per_seed = [
            f"classifier {a['classifier']:.3f}, termination head {a['termination']:.3f}"
            for a in aucs
        ]
        text += "\n\nSuccess predictors, ROC AUC on held-out demonstration chunks, per seed: "
        text += "; ".join(per_seed)
    if checks:
        text += "\n\n" + predictor_markdown(checks)
    if (folder / "references.json").exists():
        text += "\n\n" + references_markdown(json.loads((folder / "references.json").read_text()))
    (folder / "results.md").write_text(text + "\n")
    plots.learning_curves(
        runs,
        folder / "success_vs_real_steps.png",
        cost="real_steps",
        cost_label="cumulative real simulator steps",
        score_label="held-out success",
    )
    plots.learning_curves(
        runs,
        folder / "success_vs_sim_seconds.png",
        cost_label="cumulative real simulator seconds",
        score_label="held-out success",
    )
    plots.anchor_gap(runs, folder / "anchor_gap.png")
    plots.diagnostics(runs, folder / "diagnostics.png")
    return summary, runs
