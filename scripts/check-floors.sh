#!/usr/bin/env bash
# The lowest versions wmrl-env declares, installed together and running the main job: a venv
# of its own with every `>=` floor of the core and of the tasks and bench extras pinned
# (scripts/floor_requirements.py reads them from pyproject.toml), in which the pretrained world
# models load (whatever scikit-learn saved them), their tests pass, the README's quick start
# runs and `wmrl bench` runs on a small setting. Python: the interpreter that creates the venv
# (CI: 3.11, the lowest `requires-python` allows).
#
#   bash scripts/check-floors.sh        # creates .venv-floors (about 1 min with a pip cache)
set -euo pipefail
cd "$(dirname "$0")/.."

python="${PYTHON:-python3}"
venv="${FLOORS_VENV:-.venv-floors}"
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
mapfile -t floors < <("$python" scripts/floor_requirements.py tasks,bench)
echo "==> check-floors: $("$venv/bin/python" --version), ${floors[*]}"
pip=("$venv/bin/python" -m pip install --quiet --constraint constraints/cpu.txt)
"${pip[@]}" --upgrade pip "setuptools>=77" wheel 2>&1 | sed '/^WARNING: Location/d'
"${pip[@]}" --editable ".[tasks,bench]" "${floors[@]}" "pytest>=8" "pytest-timeout>=2.3" \
    "hypothesis>=6.100" 2>&1 | sed '/^WARNING: Location/d'
"$venv/bin/python" - "${floors[@]}" <<'PY'
import sys
from importlib.metadata import version

from packaging.version import Version

wrong = []
for pin in sys.argv[1:]:
    name, floor = pin.split("==")
    if Version(version(name)) != Version(floor):
        wrong.append(f"{name} {version(name)} (floor {floor})")
if wrong:
    sys.exit(f"check-floors: not at the floor: {', '.join(wrong)}")
print("check-floors: every declared floor installed")
PY
export WMRL_REQUIRED_MARKERS="" HF_HUB_OFFLINE=1 WMRL_ALLOW_WEAK_ISOLATION="${WMRL_ALLOW_WEAK_ISOLATION:-1}"
"$venv/bin/python" -m pytest -q -p no:cacheprovider --timeout=900 \
    tests/world_models/test_pretraining.py tests/world_models/test_tree_ensemble.py \
    tests/world_models/test_artifact_file.py tests/world_models/test_tree_classifier.py \
    tests/world_models/test_status_artifact.py wmrl_env/world_models/programs/ml_default.py
"$venv/bin/python" scripts/readme_quickstart.py README.md
"$venv/bin/python" -m wmrl_env.cli.main bench --seeds 1 --rounds 4 --tuning-seeds 1 \
    --arms real wmrl --out "$(mktemp -d)" | tail -2
