"""``wmrl export-log``: write an SQLite execution log to CSV or parquet.

Example:
    $ wmrl export-log runs/log.sqlite runs/log.parquet --run-id grpo-1
"""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "export-log",
        help="export an execution log to .csv or .parquet",
        description="Export every row of an SQLite execution log (or of one run) to a file; "
        "the destination's suffix (.csv or .parquet) chooses the format.",
    )
    parser.add_argument("log", help="the SQLite execution log")
    parser.add_argument("destination", help="output file, .csv or .parquet")
    parser.add_argument("--run-id", default=None, help="export only this run")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from wmrl_env.store import export_log

    rows = export_log(args.log, args.destination, run_id=args.run_id)
    print(f"wrote {rows} rows to {args.destination}")
    return 0
