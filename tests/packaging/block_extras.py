"""A pytest plugin (``-p block_extras``) that makes every optional dependency unimportable, so
that a run sees what a core-only install (numpy, scipy, scikit-learn, gymnasium) sees.

The blocker is installed by the ``pytest_configure`` hook, which runs only when the file is
loaded as a plugin: the doctest collection of the test tree imports this file too, and must
not block anything there."""

from __future__ import annotations

import importlib.abc
import sys

from wmrl_env.utils.imports import EXTRA_OF_MODULE

BLOCKED = frozenset(EXTRA_OF_MODULE) | {"verl", "datasets", "accelerate"}


class _BlockExtras(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named '{name}'", name=name)
        return None


def pytest_configure(config) -> None:
    for name in [m for m in sys.modules if m.split(".")[0] in BLOCKED]:
        del sys.modules[name]
    sys.meta_path.insert(0, _BlockExtras())
