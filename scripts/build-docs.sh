#!/usr/bin/env bash
# Build the API reference from the docstrings (Sphinx: autodoc + napoleon) with warnings as
# errors, in a venv of its own: the core install, Sphinx and pytest (wmrl_env.testing's suites
# import it); the extras' heavy dependencies are mocked (docs/reference/conf.py).
#
#   bash scripts/build-docs.sh        # writes docs/_build/html/index.html
set -euo pipefail
cd "$(dirname "$0")/.."

python="${PYTHON:-python3}"
venv="${DOCS_VENV:-.venv-docs}"
if [ ! -x "$venv/bin/python" ]; then
    echo "==> creating $venv"
    "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --constraint constraints/cpu.txt \
    --editable . "sphinx>=8,<10" "pytest>=8"
"$venv/bin/python" -m sphinx -E -W --keep-going -q -b html docs/reference docs/_build/html
echo "scripts/build-docs.sh: docs/_build/html/index.html"
