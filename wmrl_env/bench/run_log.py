"""What a bench's finished runs were made with, so a rerun into the same folder reuses them only
when nothing they depend on changed.

Each run line a bench appends carries ``"made_with"``: its :func:`fingerprint` (the config
fields the runs depend on, the package version, and whatever else the bench names, such as the
digest of a world-model artifact). :func:`read_stamped` reads a log back and raises
:class:`StaleRunLog` at the first line made with something else, or made before runs were
stamped, so stale runs are never mixed into a new report.

A bench stopped while it wrote a line (killed, out of time) leaves that line unfinished:
:func:`read_lines` sets it aside with a warning (its run is made again; every finished one is
kept) and :func:`append_line` starts the next line after it, not on it.

Example:
    >>> made = fingerprint({"rounds": 6, "seeds": 2}, resumable={"seeds"})
    >>> sorted(made), made["config"]
    (['config', 'package'], {'rounds': 6})
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Collection
from pathlib import Path
from typing import Any


class StaleRunLog(ValueError):
    """An output folder's runs were made with another configuration, package version or
    artifact (or before runs recorded what they were made with)."""


def fingerprint(
    config: dict[str, Any], resumable: Collection[str], **made_with: Any
) -> dict[str, Any]:
    """The fields of ``config`` not in ``resumable`` (those a finished run does not depend
    on), the package version and ``made_with``, as a log line reads them back."""
    from wmrl_env import __version__

    fields = {k: v for k, v in config.items() if k not in resumable}
    return json.loads(json.dumps({"config": fields, "package": __version__, **made_with}))


def file_digest(path: str | Path) -> str:
    """sha256 of a file's bytes (an artifact a bench loads)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def world_model_digests(version: str) -> dict[str, str]:
    """:func:`file_digest` of every file ML world model ``version`` loads, by role
    (:func:`~wmrl_env.world_models.programs.ml_default.world_model_files`)."""
    from wmrl_env.world_models.programs.ml_default import world_model_files

    return {name: file_digest(path) for name, path in world_model_files(version).items()}


def check_stamp(made_with: dict[str, Any] | None, expected: dict[str, Any], where: str) -> None:
    """Raise :class:`StaleRunLog` unless a run line's ``made_with`` is ``expected``."""
    if made_with == expected:
        return
    if made_with is None:
        what = "no record of what it was made with (an older log)"
    else:
        old, new = made_with.get("config", {}), expected["config"]
        changed = [f"config.{k}" for k in set(old) | set(new) if old.get(k) != new.get(k)]
        changed += [k for k in set(made_with) | set(expected)
                    if k != "config" and made_with.get(k) != expected.get(k)]  # fmt: skip
        what = "another " + ", ".join(sorted(changed))
    raise StaleRunLog(
        f"{where}: a run made with {what}; its runs cannot be reused for this configuration. "
        "Give a new --out (the finished runs stay where they are)."
    )


def read_lines(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """``(line number, row)`` of every whole JSON line of ``path`` (none if it does not
    exist); a line that does not parse, as one a stopped writer left unfinished, is set
    aside with a warning."""
    if not path.is_file():
        return []
    rows = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append((number, json.loads(line)))
        except json.JSONDecodeError:
            warnings.warn(
                f"{path}, line {number}: not a whole JSON line (its writer was stopped while "
                "writing it?); set aside, what it recorded is made again",
                stacklevel=2,
            )
    return rows


def read_stamped(path: Path, expected: dict[str, Any]) -> list[dict[str, Any]]:
    """Every whole line of the JSON-lines file ``path`` (:func:`read_lines`), each checked
    with :func:`check_stamp` against ``expected``."""
    rows = []
    for number, row in read_lines(path):
        check_stamp(row.get("made_with"), expected, f"{path}, line {number}")
        rows.append(row)
    return rows


def append_line(path: Path, row: dict[str, Any]) -> None:
    """Append ``row`` as one JSON line in one write (whole lines even with several processes
    appending), on a new line if a stopped writer left the file without its last newline."""
    data = (json.dumps(row) + "\n").encode()
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data
        while data:
            data = data[os.write(fd, data) :]
    finally:
        os.close(fd)
