#!/usr/bin/env bash
# Set up everything the test suite needs on a fresh machine, then run it.
#
#   bash scripts/test.sh              # whole suite
#   bash scripts/test.sh -m "not slow" tests/fusion   # extra arguments go to pytest
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup-system.sh
bash scripts/setup.sh all,dev
bash scripts/setup-robotics.sh
# everything above installed them: a robot test that cannot run is a failure, not a skip
export WMRL_REQUIRED_MARKERS="${WMRL_REQUIRED_MARKERS:+$WMRL_REQUIRED_MARKERS,}robosuite,libero,torch"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
exec .venv/bin/python -m pytest --timeout=900 "$@"
