"""``wmrl demo``: the fusion methods side by side on a hackable synthetic bandit."""

from __future__ import annotations

import argparse
import time

from wmrl_env.demo import format_table, run_demo
from wmrl_env.fusion import METHODS


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="compare the fusion methods on a synthetic GRPO bandit (seconds, no extras)",
        description=run_demo.__doc__,
    )
    parser.add_argument("--steps", type=int, default=300, help="training steps per run")
    parser.add_argument("--seeds", type=int, default=3, help="independent runs per method")
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    results = run_demo(steps=args.steps, seeds=args.seeds, methods=args.methods)
    print(format_table(results))
    print(
        f"\n{args.seeds} seeds x {args.steps} steps per method, {time.perf_counter() - start:.1f} s"
    )
    return 0
