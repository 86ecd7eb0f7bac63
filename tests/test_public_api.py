"""The public API is the deliberate list in docs/api.md: each section matches its module's
``__all__`` both ways, every name imports, and every package declares an ``__all__``."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

import wmrl_env
import wmrl_env.envs
from wmrl_env.utils.imports import MissingDependencyError

API_DOC = Path(__file__).resolve().parents[1] / "docs" / "api.md"
PACKAGE_DIRS = {
    "wmrl_env": Path(wmrl_env.__file__).parent,
    "wmrl_env.envs": Path(wmrl_env.envs.__file__).parent,
}


def _packages() -> list[str]:
    names = []
    for prefix, root in PACKAGE_DIRS.items():
        for init in sorted(root.rglob("__init__.py")):
            parts = init.parent.relative_to(root).parts
            names.append(".".join((prefix, *parts)))
    return sorted(set(names))


def _documented() -> dict[str, list[str]]:
    """Section heading (a module, in backticks) -> the names in the first column of its table."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in API_DOC.read_text().splitlines():
        if heading := re.fullmatch(r"## `([\w.]+)`.*", line):
            current = sections.setdefault(heading.group(1), [])
        elif line.startswith("## "):
            current = None
        elif current is not None and (row := re.match(r"\| `(\w+)` \|", line)):
            current.append(row.group(1))
    return sections


DOCUMENTED = _documented()


def test_the_doc_parser_reads_sections() -> None:
    assert "RewardFusion" in DOCUMENTED["wmrl_env"]
    assert "OnlineCalibrator" in DOCUMENTED["wmrl_env.fusion"]
    assert "wmrl_env.integrations.sb3" in DOCUMENTED


@pytest.mark.parametrize("package", _packages())
def test_every_package_declares_its_all(package: str) -> None:
    module = importlib.import_module(package)
    assert "__all__" in vars(module), f"{package} has no __all__"
    if module.__all__:
        assert package in DOCUMENTED, f"{package}'s __all__ has no section in docs/api.md"


@pytest.mark.parametrize("module_name", sorted(DOCUMENTED))
def test_each_section_is_the_modules_all(module_name: str) -> None:
    module = importlib.import_module(module_name)
    documented = DOCUMENTED[module_name]
    assert len(documented) == len(set(documented)), f"a name is listed twice for {module_name}"
    missing = sorted(set(module.__all__) - set(documented))
    extra = sorted(set(documented) - set(module.__all__))
    assert not missing, f"in {module_name}.__all__ but not in docs/api.md: {missing}"
    assert not extra, f"in docs/api.md but not in {module_name}.__all__: {extra}"


@pytest.mark.parametrize("module_name", sorted(DOCUMENTED))
def test_every_exported_name_imports(module_name: str) -> None:
    """A name that needs an extra which is not installed says which extra."""
    module = importlib.import_module(module_name)
    for name in module.__all__:
        try:
            getattr(module, name)
        except MissingDependencyError as error:
            assert "pip install 'wmrl-env[" in str(error), str(error)


def test_top_level_names_are_their_homes_objects() -> None:
    """The top-level table's third column names the subpackage each object comes from."""
    rows = re.findall(r"^\| `(\w+)` \| .* \| `([\w.]+)` \|$", API_DOC.read_text(), re.M)
    assert {name for name, _ in rows} == set(wmrl_env.__all__)
    for name, home in rows:
        assert getattr(wmrl_env, name) is getattr(importlib.import_module(home), name), name
        assert home == "wmrl_env" or name in importlib.import_module(home).__all__, (name, home)
