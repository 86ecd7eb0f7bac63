"""``wmrl build-tables``: run every structured program on every ML task and write the table.

Example:
    $ wmrl build-tables --workers 2 --log runs/table_v0.sqlite
"""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "build-tables",
        help="execute every structured program on every ML task, write the execution table",
        description=(
            "Runs each program of the structured space on each task once, live in the local "
            "process sandbox, logging every execution to an SQLite log (an interrupted build "
            "resumes from it), then writes <out>.csv.gz and <out>.json."
        ),
    )
    parser.add_argument("--tasks", nargs="+", default=None, help="task ids (default: all)")
    parser.add_argument("--workers", type=int, default=2, help="programs run at once")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per program")
    parser.add_argument("--log", default="runs/table_v0.sqlite", help="SQLite execution log")
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
    from wmrl_env.envs.ml_tasks.registry import ALL_TASKS
    from wmrl_env.envs.ml_tasks.sandbox import default_sandbox
    from wmrl_env.envs.ml_tasks.tables import table_path

    if args.workers < 1:
        raise SystemExit(f"--workers must be at least 1, got {args.workers}")
    build_table(
        executor=default_sandbox(max_workers=args.workers),
        log_path=args.log,
        out_path=args.out or table_path(),
        command="wmrl " + shlex.join(sys.argv[1:]) if sys.argv[1:] else "wmrl build-tables",
        task_ids=tuple(args.tasks) if args.tasks else ALL_TASKS,
        timeout_s=args.timeout,
        retry=("timeout",) if args.retry_timeouts else (),
    )
    return 0
