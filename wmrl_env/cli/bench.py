"""``wmrl bench``: the WMRL result table on this machine (see :mod:`wmrl_env.bench`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from wmrl_env.bench.config import ARMS, BenchConfig
from wmrl_env.bench.factorized import POLICIES
from wmrl_env.bench.pertask_config import (
    ANCHOR_DRAWS,
    SCREENINGS,
    SUITES,
    PerTaskConfig,
    parse_world_model,
)
from wmrl_env.bench.robotics.config import ROBOT_ARMS, SUCCESS_PREDICTORS, RobotBenchConfig
from wmrl_env.bench.tabular import OPTIMIZERS
from wmrl_env.fusion.validation import GATE_SCOPES
from wmrl_env.wrappers.shadows import SHADOWS

# flag -> (type, help); unset flags keep the preset's value
OVERRIDES: dict[str, tuple[type, str]] = {
    "seeds": (int, "independent runs per arm"),
    "iterations": (int, "GRPO rounds per run"),
    "num_groups": (int, "groups (tasks) per round"),
    "group_size": (int, "programs sampled per group"),
    "train_tasks": (int, "train on a fixed sample of N train-split tasks (0: all)"),
    "heldout_tasks": (int, "score on a fixed sample of N held-out tasks (0: all)"),
    "anchor_fraction": (float, "share of groups executed for real (at least one)"),
    "eval_every": (int, "score the policy on the held-out split every N rounds"),
    "learning_rate": (float, "learning rate of the policy's optimizer"),
    "update_epochs": (int, "gradient steps per round"),
    "hidden": (int, "policy MLP width (0: linear in the task features)"),
    "live_check": (int, "execute the final programs of N held-out tasks live, beside the table"),
    "tolerance": (float, "speedup target = the real arm's final score minus this"),
    "workers": (int, "sandbox programs run at once (live executor)"),
    "out": (str, "output folder (default runs/bench-<time>)"),
}
# flags of --domain robosuite only
ROBOT_OVERRIDES: dict[str, tuple[type, str]] = {
    "first_seed": (int, "robosuite: first seed (run the bench in per-seed pieces)"),
    "eval_starts": (int, "robosuite: held-out start seeds of every evaluation"),
    "interim_eval_starts": (
        int,
        "robosuite: evaluations before the last round use only the first N held-out starts "
        "(cheaper; noisier learning curves; the start and final success keep all)",
    ),
    "ensemble_size": (int, "robosuite: members of the dynamics ensemble"),
    "branch_groups": (int, "robosuite, wmrl-branch: groups per round started from real states"),
    "branch_horizon": (
        int,
        "robosuite, wmrl-branch: most chunks a branched group plays (default: to the episode's "
        "end)",
    ),
    "branch_rounds": (
        int,
        "robosuite, wmrl-branch: rounds of real states the branched starts are drawn from",
    ),
    "cache_dir": (str, "robosuite: where base policies and demonstrations are cached"),
}
# flags of --regime pertask only (the ML domain's default regime)
PERTASK_OVERRIDES: dict[str, tuple[type, str]] = {
    "rounds": (int, "pertask: rounds per run (one group per task per round)"),
    "tuning_seeds": (int, "pertask: seeds per rate of the learning-rate sweep (not reported)"),
    "last_k": (int, "pertask: evaluations averaged into the equal-rounds reading"),
    "balance_mix": (float, "pertask: share of uniform probability in the balanced and ucb draws"),
    "ucb_kappa": (float, "pertask: kappa of the upper bound mean + kappa * std (ucb, screening)"),
    "execute_per_group": (
        int,
        "pertask: world-model screening: the fused arms execute this many of each anchor "
        "group's programs, chosen by their upper bound (0: all)",
    ),
}
PERTASK_LISTS: dict[str, tuple[type, str]] = {
    "learning_rates": (float, "pertask: the learning-rate grid each arm's rate is chosen from"),
    "budgets": (int, "pertask: real executions per task at which arms are compared"),
    "quality_weights": (float, "pertask: W of the quality curve's world models mix:W"),
}
# flags both ML regimes read
PERTASK_SHARED = ("seeds", "group_size", "anchor_fraction", "heldout_tasks", "tolerance", "out",
                  "optimizer")  # fmt: skip
SHARED = ("seeds", "iterations", "num_groups", "group_size", "anchor_fraction", "eval_every",
          "learning_rate", "update_epochs", "workers", "out")  # fmt: skip


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="post-train program policies with GRPO: real vs anchors vs world model "
        "vs WMRL and ablations, with the oracle, trivial and search lines",
        description="Post-train one program policy per held-out task of the ML suite with "
        "GRPO, once per arm and seed, rewards replayed from the execution table; score each "
        "arm's programs on the private test; write a table, results.json and plots beside "
        "the oracle, trivial and search lines. Default: a quick run on the pool suite "
        "(5 seeds, 60 rounds; under a minute on 2 cores after setup).",
    )
    parser.add_argument("--full", action="store_true", help="the headline configuration")
    parser.add_argument(
        "--regime",
        choices=("pertask", "crosstask"),
        default="pertask",
        help="ml: pertask (default): each held-out task improves from its own executions, "
        "its own policy, reference and search lines; crosstask: one task-conditioned "
        "policy trained on the train split, scored on the held-out split",
    )
    parser.add_argument(
        "--anchor-draw",
        choices=ANCHOR_DRAWS,
        help="pertask: anchors drawn at random, balanced over tasks (default), by the world "
        "model's upper bound above each task's best executed score (ucb), or both "
        "(balanced-ucb); exact inclusion probabilities in every case",
    )
    parser.add_argument(
        "--suite",
        choices=SUITES,
        help="pertask: pool (default): the second suite's held-out tasks (generated and "
        "real-data), 152 programs of an open space per task, rewards on validation scores, "
        "every reading on the private test, world model v4 (it reads any program of the open "
        "space); v1: the first suite's held-out tasks, 72 programs, rewards and readings on "
        "the execution table's test scores, world model v3",
    )
    parser.add_argument(
        "--policy",
        choices=POLICIES,
        help="pertask: each task's policy: factorized (the pool suite's default; a logit "
        "summed over the program's components, so one execution moves every program that "
        "shares one) or tabular (the v1 suite's default; one logit per program)",
    )
    parser.add_argument(
        "--screening",
        choices=SCREENINGS,
        help="pertask, with --execute-per-group: pps (default; exact member probabilities, "
        "PPI unbiased) or top (the highest upper bounds; biased, refused with ppi)",
    )
    parser.add_argument(
        "--gate-scope",
        choices=GATE_SCOPES,
        help="pertask: the fused arms' evidence gate: pooled (default; one world-model weight "
        "from every task's anchors) or cluster (each task's weight from its own anchors)",
    )
    parser.add_argument(
        "--optimizer",
        choices=OPTIMIZERS,
        help="the policy's optimizer: pertask's tabular policies (default sgd) or crosstask's "
        "task-conditioned policy (default adam)",
    )
    parser.add_argument(
        "--domain",
        choices=("ml", "robosuite"),
        default="ml",
        help="ml: programs on the ML task suite (default); robosuite: GRPO post-training of a "
        "behaviour-cloned Lift policy on binary success, accounted in simulator steps",
    )
    parser.add_argument(
        "--executor",
        choices=("live", "replay"),
        default=BenchConfig.executor,
        help="real executions from the committed execution table (charged their recorded "
        "seconds), or live in the sandbox",
    )
    parser.add_argument(
        "--world-model",
        default=BenchConfig.world_model,
        help="default: the default world model (robosuite: the dynamics ensemble with a "
        "success predictor); random: uniform random scores (the never-worse check); "
        "mix:W (pertask): (1 - W) * the default model + W * the table's truth",
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="robosuite: run nothing; write results and figures from the runs already in "
        "--out (e.g. after running the seeds in pieces)",
    )
    parser.add_argument(
        "--success-predictor",
        choices=SUCCESS_PREDICTORS,
        help="robosuite: a classifier on the imagined state, or the ensemble's termination head",
    )
    parser.add_argument(
        "--shadow",
        choices=SHADOWS,
        help="robosuite: how each real episode's world-model score is computed: closed (the "
        "default: the policy plays the model from the start with the episode's own noise, as "
        "imagined episodes are scored), open (the model replays the real chunks: optimistic) "
        "or continued (half the real episode, then imagined: a diagnostic)",
    )
    parser.add_argument(
        "--heldout-score",
        choices=("greedy", "expected"),
        default=BenchConfig.heldout_score,
        help="score a held-out task by its most likely program, or the policy's mean",
    )
    parser.add_argument(
        "--uncertainty-anchors",
        action="store_true",
        help="fused arms draw anchor groups with probability growing with the world model's std "
        "(robosuite: its std along an imagined rollout of the current policy from each start)",
    )
    parser.add_argument(
        "--fusion-option",
        action="append",
        metavar="KEY=VALUE",
        help="robosuite: a RewardFusion argument of every arm, e.g. gate_decay=0.9 or "
        "wm_gate=off (VALUE read as JSON, else as a string); repeat for several",
    )
    parser.add_argument(
        "--arms",
        nargs="+",
        choices=sorted(set(ARMS) | set(ROBOT_ARMS)),
        help="arms to run (default: all of the domain's, except the robot bench's dense, "
        "wmrl-dense and wmrl-branch, run only when named)",
    )
    for name, (kind, text) in {**OVERRIDES, **ROBOT_OVERRIDES, **PERTASK_OVERRIDES}.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=kind, help=text)
    for name, (kind, text) in PERTASK_LISTS.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=kind, nargs="+", help=text)
    parser.set_defaults(func=run)


PERTASK_ONLY = (*PERTASK_OVERRIDES, *PERTASK_LISTS, "anchor_draw", "screening", "suite", "policy",
                "gate_scope")  # fmt: skip
ROBOT_ONLY = (*ROBOT_OVERRIDES, "success_predictor", "shadow", "fusion_option")


def parse_fusion_options(items: list[str] | None) -> dict[str, Any]:
    """``["gate_decay=0.9", "wm_gate=off"]`` -> ``{"gate_decay": 0.9, "wm_gate": "off"}``.

    >>> parse_fusion_options(["gate_decay=0.9", "wm_gate=off", "centre_groups=false"])
    {'gate_decay': 0.9, 'wm_gate': 'off', 'centre_groups': False}
    """
    options: dict[str, Any] = {}
    for item in items or ():
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise ValueError(f"--fusion-option wants KEY=VALUE (e.g. gate_decay=0.9), got {item!r}")
        if key in options:
            raise ValueError(f"--fusion-option {key} given twice")
        try:
            options[key] = json.loads(text)
        except json.JSONDecodeError:
            options[key] = text
    return options


def _refuse(names: list[str], where: str) -> None:
    if names:
        flags = ", ".join("--" + n.replace("_", "-") for n in names)
        raise ValueError(f"{flags} apply to {where} only")


def pertask_config_from_args(args: argparse.Namespace) -> PerTaskConfig:
    """The per-task regime's configuration; flags of other regimes or domains are refused."""
    robot = [n for n in ROBOT_ONLY if getattr(args, n) is not None]
    _refuse(robot, "--domain robosuite")
    crosstask = [n for n in OVERRIDES if n not in PERTASK_SHARED and getattr(args, n) is not None]
    crosstask += [n for n in ("uncertainty_anchors",) if getattr(args, n)]
    crosstask += ["executor"] if args.executor != "replay" else []
    crosstask += ["heldout_score"] if args.heldout_score != "greedy" else []
    _refuse(crosstask, "--regime crosstask")
    names = (*PERTASK_SHARED, *PERTASK_ONLY)
    overrides = {n: getattr(args, n) for n in names if getattr(args, n) is not None}
    overrides["world_model"] = args.world_model
    if args.arms:
        overrides["arms"] = tuple(args.arms)
    return (PerTaskConfig.full if args.full else PerTaskConfig.quick)(**overrides)


def config_from_args(args: argparse.Namespace) -> BenchConfig:
    _refuse([n for n in PERTASK_ONLY if getattr(args, n) is not None], "--regime pertask")
    if parse_world_model(args.world_model) is not None:
        raise ValueError("--world-model mix:W applies to --regime pertask only")
    _refuse([n for n in ROBOT_ONLY if getattr(args, n) is not None], "--domain robosuite")
    if args.arms and set(args.arms) - set(ARMS):
        raise ValueError(f"arms {sorted(set(args.arms) - set(ARMS))} are not ML bench arms")
    overrides = {name: getattr(args, name) for name in OVERRIDES if getattr(args, name) is not None}
    for name in ("executor", "world_model", "heldout_score", "uncertainty_anchors"):
        overrides[name] = getattr(args, name)
    if args.optimizer is not None:
        overrides["optimizer"] = args.optimizer
    if args.arms:
        overrides["arms"] = tuple(args.arms)
    return (BenchConfig.full if args.full else BenchConfig.quick)(**overrides)


def robot_config_from_args(args: argparse.Namespace) -> RobotBenchConfig:
    """The robosuite bench's configuration; ML-only flags are refused."""
    ml_only = [n for n in OVERRIDES if n not in SHARED and getattr(args, n) is not None]
    ml_only += [n for n in (*PERTASK_ONLY, "optimizer") if getattr(args, n) is not None]
    if ml_only:
        flags = ", ".join("--" + n.replace("_", "-") for n in ml_only)
        raise ValueError(f"{flags} apply to the ML domain only")
    names = (*SHARED, *ROBOT_OVERRIDES, "success_predictor", "shadow")
    overrides = {n: getattr(args, n) for n in names if getattr(args, n) is not None}
    if args.world_model not in ("default", "random"):
        raise ValueError("--world-model for robosuite is 'default' or 'random'")
    overrides["world_model"] = "random" if args.world_model == "random" else "dynamics"
    overrides["uncertainty_anchors"] = bool(args.uncertainty_anchors)
    overrides["fusion_options"] = parse_fusion_options(args.fusion_option)
    if args.arms:
        overrides["arms"] = tuple(args.arms)
    return (RobotBenchConfig.full if args.full else RobotBenchConfig.quick)(**overrides)


def run_robots(args: argparse.Namespace) -> int:
    """``wmrl bench --domain robosuite``: progress lines, then the table."""
    from wmrl_env.bench.robotics import run_robot_bench, write_report
    from wmrl_env.bench.robotics.report import markdown
    from wmrl_env.bench.run_log import StaleRunLog
    from wmrl_env.utils.imports import MissingDependencyError, require

    try:
        config = robot_config_from_args(args)
        needed = ("matplotlib",) if args.report_only else ("torch", "robosuite", "matplotlib")
        for module in needed:
            require(module, "wmrl bench --domain robosuite")
    except (ValueError, MissingDependencyError) as error:
        print(f"wmrl bench: {error}", file=sys.stderr)
        return 2

    def on_step(arm: str, seed: int, record) -> None:
        if record.true_score == record.true_score:  # evaluated this round
            print(
                f"  {arm} seed {seed} round {record.step}: held-out success "
                f"{record.true_score:.3f}, {record.real_steps:,} real steps, "
                f"{record.real_exec_seconds:.1f} sim s",
                flush=True,
            )

    if args.report_only:
        if not config.out:
            print("wmrl bench: --report-only needs --out FOLDER", file=sys.stderr)
            return 2
        try:
            summary, _ = write_report(Path(config.out))
        except (ValueError, FileNotFoundError) as error:
            print(f"wmrl bench: {error}", file=sys.stderr)
            return 2
        folder, seconds = Path(config.out), 0.0
    else:
        try:
            result = run_robot_bench(
                config, on_step=on_step, on_phase=lambda m: print(m, flush=True)
            )
        except StaleRunLog as error:
            print(f"wmrl bench: {error}", file=sys.stderr)
            return 2
        summary, folder, seconds = result.summary, result.folder, result.seconds
    print()
    print(markdown(summary))
    print(
        f"\nspeedup = real steps the real arm needed to reach its final held-out success (or "
        f"95 % / 90 % of it) / those each arm needed to reach it and stay; "
        f"{seconds:.0f} s; outputs in {folder}/"
    )
    return 0


def run_pertask(args: argparse.Namespace) -> int:
    """``wmrl bench --regime pertask``: progress lines, then the report."""
    from wmrl_env.bench.pertask_bench import run_pertask_bench
    from wmrl_env.bench.run_log import StaleRunLog
    from wmrl_env.utils.imports import MissingDependencyError, require

    try:
        config = pertask_config_from_args(args)
        require("matplotlib", "wmrl bench (its figures)")
    except (ValueError, MissingDependencyError) as error:
        print(f"wmrl bench: {error}", file=sys.stderr)
        return 2
    try:
        result = run_pertask_bench(config, on_phase=lambda message: print(message, flush=True))
    except StaleRunLog as error:
        print(f"wmrl bench: {error}", file=sys.stderr)
        return 2
    print()
    print(result.markdown)
    print(
        f"\nper-task regime, {len(result.summary)} arm rows x {config.seeds} seeds, world model "
        f"{_world_model_text(config)}, {config.anchor_draw} anchors{_screening_text(config)}, "
        f"{config.optimizer}, {config.policy} policy, {config.suite} suite; "
        f"{result.seconds:.0f} s; outputs in {result.folder}/"
    )
    return 0


def _world_model_text(config: PerTaskConfig) -> str:
    if config.world_model == "default":
        return "v4" if config.suite == "pool" else "v3"
    return config.world_model


def _screening_text(config: PerTaskConfig) -> str:
    if not config.execute_per_group:
        return ""
    return (
        f", screening ({config.screening}: {config.execute_per_group} of {config.group_size} "
        "executed per anchor group)"
    )


def run(args: argparse.Namespace) -> int:
    if args.domain == "robosuite":
        return run_robots(args)
    if args.regime == "pertask":
        return run_pertask(args)
    from wmrl_env.bench import run_bench
    from wmrl_env.bench.live_check import markdown as live_markdown
    from wmrl_env.bench.report import markdown_table
    from wmrl_env.bench.run_log import StaleRunLog
    from wmrl_env.utils.imports import MissingDependencyError, require

    try:
        config = config_from_args(args)
    except ValueError as error:
        print(f"wmrl bench: {error}", file=sys.stderr)
        return 2
    try:
        tqdm = require("tqdm", "wmrl bench").tqdm
        require("torch", "wmrl bench (its policy)")
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
                    f"  {arm} seed {seed}: held-out score {record.true_score:.3f}, "
                    f"{record.real_exec_seconds:.0f} real-execution s",
                    flush=True,
                )

        def on_phase(message: str) -> None:
            bar.set_description(message)
            if not interactive:
                print(message, flush=True)

        try:
            result = run_bench(config, on_step=on_step, on_phase=on_phase)
        except StaleRunLog as error:
            bar.close()
            print(f"wmrl bench: {error}", file=sys.stderr)
            return 2
    print()
    print(markdown_table(result.summaries))
    print("\n| reference line (held-out tasks) | score |\n|---|---|")
    for name, value in result.reference_lines.items():
        print(f"| {name} | {value:.3f} |")
    baseline = result.summaries.get("real")
    if baseline is not None:
        print(
            f"\nspeedup = real-execution seconds the real arm needed to reach its final "
            f"held-out score ({baseline.final_score_mean:.3f}; or 95 % / 90 % of it) / those "
            "each arm needed to reach it and stay"
        )
    if result.live_checks:
        same = sum(c.matches for c in result.live_checks)
        print(
            f"\nlive check: {same} of {len(result.live_checks)} final programs scored in the "
            "sandbox exactly as the execution table says\n" + live_markdown(result.live_checks)
        )
        if same < len(result.live_checks):
            print(
                "a mismatch means the committed table is not what this machine's sandbox does "
                "(a table built before the task data or the libraries changed): rebuild it "
                "with 'wmrl build-tables'"
            )
    print(
        f"\n{config.executor} execution, {len(config.arms)} arms x {config.seeds} seeds x "
        f"{config.iterations} rounds, {result.seconds:.0f} s; outputs in {result.folder}/"
    )
    return 0
