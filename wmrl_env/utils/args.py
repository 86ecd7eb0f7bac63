"""Command-line flags from a dataclass of arguments (the CleanRL / TRL way to configure scripts).

Each field becomes ``--field-name`` with its default and its ``metadata["help"]``; booleans
take ``true``/``false``.

Example:
    >>> from dataclasses import dataclass, field
    >>> @dataclass
    ... class Args:
    ...     iterations: int = field(default=10, metadata={"help": "training rounds"})
    ...     method: str = "wmrl"
    ...     cuda: bool = False
    >>> parse_args(Args, ["--iterations", "3", "--cuda", "true"])
    Args(iterations=3, method='wmrl', cuda=True)
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from typing import Any, TypeVar, get_type_hints

__all__ = ["parse_args"]

T = TypeVar("T")


def _bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def parse_args(cls: type[T], argv: Sequence[str] | None = None) -> T:
    """Parse ``argv`` (default ``sys.argv[1:]``) into an instance of the dataclass ``cls``."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    parser = argparse.ArgumentParser(description=(cls.__doc__ or "").strip().splitlines()[0])
    hints = get_type_hints(cls)
    for item in dataclasses.fields(cls):
        kind: Any = hints[item.name]
        if kind is bool:
            kind = _bool
        elif kind not in (int, float, str):
            kind = str
        default = item.default
        if default is dataclasses.MISSING and item.default_factory is not dataclasses.MISSING:
            default = item.default_factory()
        parser.add_argument(
            f"--{item.name.replace('_', '-')}",
            type=kind,
            default=default,
            required=default is dataclasses.MISSING,
            help=f"{item.metadata.get('help', '')} (default: {default})",
        )
    return cls(**vars(parser.parse_args(argv)))
