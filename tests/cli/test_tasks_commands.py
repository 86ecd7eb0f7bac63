"""``wmrl build-tables`` and ``wmrl export-log`` through their parsers."""

from __future__ import annotations

import argparse
import csv

import pytest

from wmrl_env.cli import export_log, tables
from wmrl_env.executors import ExecResult
from wmrl_env.store import ExecutionLog


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="wmrl")
    subparsers = parser.add_subparsers(dest="command", required=True)
    tables.register(subparsers)
    export_log.register(subparsers)
    return parser


def test_export_log_writes_csv(tmp_path, capsys) -> None:
    with ExecutionLog(tmp_path / "log.sqlite") as log:
        log.record(ExecResult(job_id="a", status="ok", score=1.0), artifact="x", run_id="r1")
        log.record(ExecResult(job_id="b", status="ok", score=0.0), artifact="y", run_id="r2")
    args = _parser().parse_args(
        ["export-log", str(tmp_path / "log.sqlite"), str(tmp_path / "out.csv"), "--run-id", "r2"]
    )
    assert args.func(args) == 0
    assert "wrote 1 rows" in capsys.readouterr().out
    with open(tmp_path / "out.csv", newline="") as handle:
        assert [row["job_id"] for row in csv.DictReader(handle)] == ["b"]


def test_build_tables_arguments() -> None:
    args = _parser().parse_args(["build-tables", "--tasks", "iris", "wine", "--workers", "3"])
    assert args.tasks == ["iris", "wine"] and args.workers == 3 and args.timeout is None
    bad = _parser().parse_args(["build-tables", "--workers", "0"])
    with pytest.raises(SystemExit, match="--workers must be at least 1"):
        bad.func(bad)


def test_build_tables_takes_splits_in_order_and_defaults_to_the_warm_pool() -> None:
    args = _parser().parse_args(["build-tables", "--split", "heldout", "wm"])
    assert args.split == ["heldout", "wm"] and not args.cold and args.tasks is None
    assert args.log == "runs/table_v1.sqlite"
    with pytest.raises(SystemExit):
        _parser().parse_args(["build-tables", "--split", "test"])
    with pytest.raises(SystemExit):  # one or the other
        _parser().parse_args(["build-tables", "--split", "wm", "--tasks", "iris"])
