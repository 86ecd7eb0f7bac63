#!/usr/bin/env bash
# A core-only install at the declared floor of gymnasium (1.2.2: AutoresetMode from 1.1,
# DictInfoToList on nested info dicts from 1.2.2; 1.2.1 fails tests/wrappers), with
# pytest and nothing else: the whole suite must collect without errors (a missing extra is a
# skip that names it), and the core tests of the vector env must pass.
#
#   bash scripts/check-core-install.sh        # creates .venv-core (about 1 min with a pip cache)
set -euo pipefail
cd "$(dirname "$0")/.."

python="${PYTHON:-python3}"
venv="${CORE_VENV:-.venv-core}"
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip install --quiet --constraint constraints/cpu.txt)
"${pip[@]}" --upgrade pip "setuptools>=77" wheel
"${pip[@]}" --editable . "gymnasium==1.2.2" "pytest>=8" "pytest-timeout>=2.3" "hypothesis>=6.100"
"$venv/bin/python" -c "import gymnasium; print('core-only venv: gymnasium', gymnasium.__version__)"
export WMRL_REQUIRED_MARKERS=""
"$venv/bin/python" -m pytest --collect-only -q -p no:cacheprovider | tail -3
"$venv/bin/python" -m pytest -q -p no:cacheprovider -m "not slow" \
    tests/test_import_core.py tests/wrappers/test_vector_outcome.py wmrl_env/wrappers
