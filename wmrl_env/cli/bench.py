"""``wmrl bench``: the WMRL result table on this machine (see :mod:`wmrl_env.bench`)."""

from __future__ import annotations

import argparse
import sys

from wmrl_env.bench.config import ARMS, HELDOUT, BenchConfig

# flag -> (type, help); unset flags keep the preset's value
OVERRIDES: dict[str, tuple[type, str]] = {
    "seeds": (int, "independent runs per arm"),
    "iterations": (int, "GRPO rounds per run"),
    "num_groups": (int, "groups (tasks) per round"),
    "group_size": (int, "programs sampled per group"),
    "anchor_fraction": (float, "share of groups executed for real (at least one)"),
    "eval_every": (int, "evaluate the greedy policy every N rounds"),
    "learning_rate": (float, "Adam learning rate of the policy"),
    "tolerance": (float, "speedup target = the real arm's final score minus this"),
    "workers": (int, "sandbox programs run at once (live executor)"),
    "out": (str, "output folder (default runs/bench-<time>)"),
}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="GRPO with real execution vs world model vs WMRL and ablations, on ML tasks",
        description="Train a structured-program policy with GRPO on held-out ML tasks once per "
        "arm and seed; write a table, results.json and plots. Default: a quick run with live "
        "sandbox execution (minutes on 2 cores).",
    )
    parser.add_argument("--full", action="store_true", help="the headline configuration")
    parser.add_argument(
        "--executor",
        choices=("live", "replay"),
        default=BenchConfig.executor,
        help="live sandbox runs, or the committed execution table",
    )
    parser.add_argument(
        "--true-score",
        choices=("table", "live"),
        default=BenchConfig.true_score,
        help="measure the greedy policy's score from the execution table (the default: same "
        "result as a live run) or by executing it",
    )
    parser.add_argument("--arms", nargs="+", choices=ARMS, help="arms to run (default: all)")
    parser.add_argument("--tasks", nargs="+", choices=HELDOUT, help="held-out tasks to train on")
    for name, (kind, text) in OVERRIDES.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=kind, help=text)
    parser.set_defaults(func=run)


def config_from_args(args: argparse.Namespace) -> BenchConfig:
    overrides = {name: getattr(args, name) for name in OVERRIDES if getattr(args, name) is not None}
    overrides["executor"] = args.executor
    overrides["true_score"] = args.true_score
    if args.arms:
        overrides["arms"] = tuple(args.arms)
    if args.tasks:
        overrides["tasks"] = tuple(args.tasks)
    return (BenchConfig.full if args.full else BenchConfig.quick)(**overrides)


def run(args: argparse.Namespace) -> int:
    from wmrl_env.bench import run_bench
    from wmrl_env.bench.report import markdown_table
    from wmrl_env.utils.imports import MissingDependencyError, require

    try:
        config = config_from_args(args)
    except ValueError as error:
        print(f"wmrl bench: {error}", file=sys.stderr)
        return 2
    try:
        tqdm = require("tqdm", "wmrl bench").tqdm
        require("transformers", "wmrl bench (its world model)")
    except MissingDependencyError as error:
        print(f"wmrl bench: {error}", file=sys.stderr)
        return 2
    total = len(config.arms) * config.seeds * config.iterations
    interactive = sys.stderr.isatty()
    with tqdm(total=total, unit="round", dynamic_ncols=True, disable=not interactive) as bar:

        def on_step(arm: str, seed: int, record) -> None:
            bar.update(1)
            if record.true_score != record.true_score:  # not evaluated this round
                return
            bar.set_postfix(arm=arm, seed=seed, score=f"{record.true_score:.3f}")
            if not interactive and record.step == config.iterations:
                print(
                    f"  {arm} seed {seed}: true score {record.true_score:.3f}, "
                    f"{record.real_exec_seconds:.0f} real-execution s",
                    flush=True,
                )

        def on_phase(message: str) -> None:
            bar.set_description(message)
            if not interactive:
                print(message, flush=True)

        result = run_bench(config, on_step=on_step, on_phase=on_phase)
    print()
    print(markdown_table(result.summaries))
    baseline = result.summaries.get("real")
    if baseline is not None:
        print(
            f"\nspeedup = real-execution seconds the real arm needed to reach its final score "
            f"({baseline.final_score_mean:.3f}) / those each arm needed to reach it and stay"
        )
    print(
        f"{config.executor} execution, {config.seeds} seeds x {config.iterations} rounds, "
        f"{result.seconds:.0f} s; outputs in {result.folder}/"
    )
    return 0
