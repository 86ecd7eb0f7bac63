"""Sphinx configuration of the API reference, built from the docstrings.

bash scripts/build-docs.sh      # a venv with the core install and Sphinx; warnings are errors
"""

from __future__ import annotations

import wmrl_env

project = "wmrl-env"
author = "wmrl-env developers"  # docs-check: ignore
release = wmrl_env.__version__
version = release

extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.viewcode"]

# The reference is built against the core install (numpy, scipy, scikit-learn, gymnasium) plus
# pytest: the modules of the extras import their heavy dependencies at import time, so those
# are mocked here rather than installed.
autodoc_mock_imports = [
    "torch",
    "transformers",
    "tokenizers",
    "safetensors",
    "peft",
    "accelerate",
    "trl",
    "datasets",
    "stable_baselines3",
    "vllm",
    "verl",
    "ray",
    "docker",
    "robosuite",
    "mujoco",
    "h5py",
    "matplotlib",
    "pandas",
    "pyarrow",
    "statsmodels",
]
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_format = "short"
autoclass_content = "both"
# gymnasium's own docstrings (inherited by env methods that add none) are not this package's
autodoc_inherit_docstrings = False
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False

exclude_patterns = ["_build"]


def _no_builtin_docstrings(app, what, name, obj, options, lines) -> None:
    """A constant without a doc comment shows its value, not its type's docstring."""
    if what == "data" and lines and type(obj).__doc__ and lines[0] in type(obj).__doc__:
        lines.clear()


def setup(app) -> None:
    app.connect("autodoc-process-docstring", _no_builtin_docstrings)


html_theme = "alabaster"
html_title = f"wmrl-env {release} API reference"
html_static_path: list[str] = []
