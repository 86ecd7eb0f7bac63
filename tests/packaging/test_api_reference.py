"""The API reference (docs/reference, built by scripts/build-docs.sh) has a page for every
package docs/api.md lists, and each page documents that package."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "reference"


def api_packages() -> list[str]:
    text = (ROOT / "docs" / "api.md").read_text()
    return re.findall(r"^## `(wmrl_env[\w.]*)`", text, flags=re.MULTILINE)


def test_every_package_of_api_md_has_a_page_in_the_toctree() -> None:
    packages = api_packages()
    assert "wmrl_env.fusion" in packages and len(packages) > 10
    index = (REFERENCE / "index.rst").read_text()
    for package in packages:
        page = REFERENCE / f"{package}.rst"
        assert page.is_file(), f"docs/reference/{package}.rst is missing"
        assert f".. automodule:: {package}\n" in page.read_text(), page
        assert re.search(rf"^   {re.escape(package)}$", index, flags=re.MULTILINE), package


def test_no_page_for_a_package_api_md_does_not_list() -> None:
    pages = {p.stem for p in REFERENCE.glob("wmrl_env*.rst")}
    assert pages == set(api_packages())
