"""``wmrl build-tables``: run the table's programs on the suite's tasks and write the table.

Example:
    $ wmrl build-tables --split heldout --workers 2 --log runs/table_v1.sqlite
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "build-tables",
        help="execute the structured programs on the ML tasks, write the execution table",
        description=(
            "Runs each program of the table (all 72 on train and heldout tasks, the seeded "
            "sample on wm tasks) on each task once, live in the local process sandbox (its "
            "warm pool unless --cold), "
            "logging every execution to an SQLite log (an interrupted build resumes from it), "
            "then writes <out>.csv.gz and <out>.json with every task the log holds complete."
        ),
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--tasks", nargs="+", default=None, help="task ids")
    which.add_argument(
        "--split",
        nargs="+",
        choices=("heldout", "train", "wm"),
        default=None,
        help="the splits to run, in this order (default: heldout train wm)",
    )
    parser.add_argument("--workers", type=int, default=2, help="programs run at once")
    parser.add_argument(
        "--cold",
        action="store_true",
        help="start a fresh interpreter per program instead of the warm pool (same scores, "
        "about 3-5 s more per program)",
    )
    parser.add_argument("--timeout", type=float, default=None, help="seconds per program")
    parser.add_argument("--log", default="runs/table_v1.sqlite", help="SQLite execution log")
    parser.add_argument("--out", default=None, help="table path (default: the packaged one)")
    parser.add_argument(
        "--retry-timeouts",
        action="store_true",
        help="run again every program whose latest logged run timed out (after a machine "
        "stall); the table keeps the latest run, the log keeps all",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from wmrl_env.envs.ml_tasks.build import build_table
    from wmrl_env.envs.ml_tasks.registry import task_ids
    from wmrl_env.envs.ml_tasks.sandbox import default_sandbox
    from wmrl_env.envs.ml_tasks.tables import DATA_DIR, table_path

    if args.workers < 1:
        raise SystemExit(f"--workers must be at least 1, got {args.workers}")
    if args.tasks:
        tasks: tuple[str, ...] | None = tuple(args.tasks)
    elif args.split:
        tasks = tuple(t for split in args.split for t in task_ids(split))
    else:
        tasks = None
    build_table(
        executor=default_sandbox(max_workers=args.workers, warm=not args.cold, suite_programs=True),
        log_path=args.log,
        out_path=args.out or table_path(),
        command="wmrl " + shlex.join(sys.argv[1:]) if sys.argv[1:] else "wmrl build-tables",
        task_ids=tasks,
        timeout_s=args.timeout,
        retry=("timeout",) if args.retry_timeouts else (),
        update_registry=args.out is None or Path(args.out).resolve().parent == DATA_DIR.resolve(),
    )
    return 0
