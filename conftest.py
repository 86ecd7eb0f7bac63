"""Repository-wide collection rule: a module (a test file, or a package module collected for
its doctests) that cannot be imported because an optional dependency is missing is reported
as a skip naming the extra to install, never as a collection error.

A dependency whose marker is listed in ``WMRL_REQUIRED_MARKERS`` stays an error (CI installs
it, so its absence is a broken install).
"""

from __future__ import annotations

import os
import re

import pytest

from wmrl_env.utils.imports import EXTRA_OF_MODULE

_MISSING = (
    re.compile(r"No module named '([\w.]+)'"),
    re.compile(r"needs '([\w.]+)', which is not installed"),
)
# optional import name -> the test marker that requires it (tests/conftest.py)
_MARKER_OF_MODULE = {
    "stable_baselines3": "sb3",
    "mujoco": "robosuite",
    "tokenizers": "transformers",
}


def _missing_optional(text: str) -> str | None:
    for pattern in _MISSING:
        for name in pattern.findall(text):
            if name.split(".")[0] in EXTRA_OF_MODULE:
                return name.split(".")[0]
    return None


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    report = yield
    if not (report.failed and isinstance(collector, pytest.Module)):
        return report
    module = _missing_optional(str(report.longrepr))
    if module is None:
        return report
    required = {m.strip() for m in os.environ.get("WMRL_REQUIRED_MARKERS", "").split(",")}
    if _MARKER_OF_MODULE.get(module, module) in required:
        return report
    extra = EXTRA_OF_MODULE[module]
    report.outcome = "skipped"
    report.longrepr = (
        str(collector.path),
        0,
        f"Skipped: needs {module}, which is not installed (pip install 'wmrl-env[{extra}]')",
    )
    return report
