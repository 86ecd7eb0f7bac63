#!/usr/bin/env bash
# Create ./.venv and install wmrl-env (editable) with the given extras.
#
#   bash scripts/setup.sh            # core + bench extras
#   bash scripts/setup.sh all,dev    # everything the test suite uses
#
# torch is pinned through constraints/cpu.txt so that a CPU machine never pulls a CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."

extras="${1:-bench}"
python="${PYTHON:-python3}"
venv="${VENV:-.venv}"

if [ ! -x "$venv/bin/python" ]; then
    echo "==> creating $venv"
    "$python" -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip install --quiet --constraint constraints/cpu.txt)
"${pip[@]}" --upgrade pip "setuptools>=77" wheel
echo "==> installing wmrl-env[$extras] into $venv"
"${pip[@]}" --editable ".[$extras]"
