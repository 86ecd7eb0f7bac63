"""Entry point of the ``wmrl`` command.

Each sub-command lives in its own module under ``wmrl_env.cli`` and exposes
``register(subparsers)``, which adds its parser and sets ``func`` to a callable taking the
parsed arguments and returning an exit code. Modules are imported lazily so that a command's
optional dependencies are needed only when that command runs.

Example:
    $ wmrl --help
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# sub-command modules, in the order ``wmrl --help`` lists them
COMMAND_MODULES: tuple[str, ...] = (
    "wmrl_env.cli.bench",
    "wmrl_env.cli.demo",
    "wmrl_env.cli.fidelity",
    "wmrl_env.cli.tables",
    "wmrl_env.cli.export_log",
    "wmrl_env.cli.train_world_model",
    "wmrl_env.cli.build_image",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="wmrl", description="World Model RL: world-model rewards anchored in real execution."
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
