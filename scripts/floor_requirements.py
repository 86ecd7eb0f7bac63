"""The lowest versions pyproject.toml declares, as pins: ``name==floor`` for every dependency
of the core and of the given extras that has a ``>=`` floor (an ``==`` pin as it is).

    python scripts/floor_requirements.py tasks,bench     # one pin a line
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import tomllib

_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9_.-]+)\s*(?:\[[^\]]*\])?\s*(>=|==)\s*([\w.]+)")


def floor_pins(extras: list[str], pyproject: Path) -> list[str]:
    """``name==version`` for each floored dependency of the core and of ``extras``."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    requirements = list(project["dependencies"])
    for extra in extras:
        requirements += project["optional-dependencies"][extra]
    pins: dict[str, str] = {}
    for requirement in requirements:
        found = _REQUIREMENT.match(requirement)
        if found:
            name, _, version = found.groups()
            pins.setdefault(name.lower(), f"{name}=={version}")
    return sorted(pins.values())


if __name__ == "__main__":
    wanted = [e for e in (sys.argv[1] if len(sys.argv) > 1 else "").split(",") if e]
    print("\n".join(floor_pins(wanted, Path(__file__).resolve().parents[1] / "pyproject.toml")))
