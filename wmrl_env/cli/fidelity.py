"""``wmrl fidelity``: measure a world model against held-out real executions.

Examples:
    $ wmrl fidelity --out runs/fidelity                      # v4 on the pool suite's tasks
    $ wmrl fidelity --log runs/log.sqlite --out runs/fid     # on your own executions
    $ wmrl fidelity --split heldout --out runs/fid-v1        # v3 on the first suite
    $ wmrl fidelity --world-model mypkg.models:make --log runs/log.sqlite --anchors 1
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path
from typing import Any

DESCRIPTION = (
    "Run a world model against held-out real executions and report how faithful it is: "
    "status accuracy, failure AUC and calibration, score MAE, +-1/+-2 std coverage and "
    "calibration error, within-group Spearman on groups of GRPO's size, the noise ceiling "
    "where programs ran more than once, and the real-execution saving the bench's quality "
    "curve predicts at that quality. Writes fidelity.json and fidelity.png to --out. "
    "Run it on a new environment before training with a world model."
)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "fidelity", help="measure a world model against real executions", description=DESCRIPTION
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--log", default=None, help="an SQLite execution log (wmrl_env.store)")
    source.add_argument(
        "--split",
        default=None,
        help="the first ML suite's split(s) whose execution-table rows to use (e.g. heldout; "
        "world model v3 by default)",
    )
    source.add_argument(
        "--pool",
        nargs="?",
        const="",
        default=None,
        metavar="TABLE",
        help="a pool table of the second suite (JSON lines; without a path, and the default "
        "when neither --log nor --split is given: the committed one, its generated held-out "
        "tasks), scored as the pool suite rewards: the validation score normalised per task",
    )
    parser.add_argument("--run-id", default=None, help="with --log: only this run's rows")
    parser.add_argument(
        "--world-model",
        default=None,
        help="'v4' (reads any program of the open space), 'v3', 'v2', or 'module:function' "
        "returning a world model with predict_outcomes (default: v4 on a pool table, v3 on the "
        "first suite's splits and on a log, whose tasks are the first suite's by default)",
    )
    parser.add_argument("--group-size", type=int, default=8, help="GRPO group size (8)")
    parser.add_argument(
        "--anchors",
        type=int,
        default=0,
        help="anchor groups per task taught to the world model first (left out of the figures)",
    )
    parser.add_argument(
        "--failure-score", type=float, default=0.0, help="reward of a failed run (0)"
    )
    parser.add_argument(
        "--quality-curve",
        default=None,
        help="a wmrl bench results.json whose quality curve predicts the saving "
        "(default: the committed headline run's)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the groups and anchors")
    parser.add_argument("--out", default="runs/fidelity", help="folder for the report files")
    parser.add_argument("--no-plot", action="store_true", help="write the JSON only")
    parser.set_defaults(func=run)


def load_world_model(spec: str) -> Any:
    """``v2`` / ``v3`` / ``v4``, or ``module:function`` called with no argument."""
    from wmrl_env.world_models.programs.ml_default import VERSIONS, load_ml_world_model

    if spec in VERSIONS:
        return load_ml_world_model(spec)
    module, _, name = spec.partition(":")
    if not (module and name):
        raise SystemExit(
            f"--world-model {spec!r}: expected one of {list(VERSIONS)} or 'module:function'"
        )
    try:
        factory = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise SystemExit(f"--world-model {spec!r}: {exc}") from exc
    return factory()


def run(args: argparse.Namespace) -> int:
    from wmrl_env.fidelity import (
        curve_from_results,
        headline,
        log_cases,
        measure,
        pool_cases,
        suite_cases,
        write_json,
        write_plot,
    )
    from wmrl_env.fidelity.quality import HEADLINE_CURVE, HEADLINE_SOURCE

    if args.group_size < 2 or args.anchors < 0:
        raise SystemExit("--group-size must be >= 2 and --anchors >= 0")
    try:
        if args.log:
            cases = log_cases(args.log, run_id=args.run_id)
        elif args.split is not None:
            cases = suite_cases(args.split)
        else:
            cases = pool_cases(args.pool or None)
        pool = not args.log and args.split is None
    except (FileNotFoundError, ValueError) as exc:
        raise SystemExit(str(exc)) from exc
    curve, source = HEADLINE_CURVE, HEADLINE_SOURCE
    if args.quality_curve:
        curve, source = curve_from_results(args.quality_curve), args.quality_curve
    result = measure(
        load_world_model(args.world_model or ("v4" if pool else "v3")),
        cases,
        group_size=args.group_size,
        anchor_groups=args.anchors,
        failure_score=args.failure_score,
        seed=args.seed,
        curve=curve,
        curve_source=source,
    )
    out = Path(args.out)
    print(headline(result.figures))
    print(f"wrote {write_json(result, out / 'fidelity.json')}")
    if not args.no_plot:
        print(f"wrote {write_plot(result, out / 'fidelity.png')}")
    return 0
