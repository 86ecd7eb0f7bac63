#!/usr/bin/env bash
# Set up everything the test suite needs on a fresh machine, then run it.
#
#   bash scripts/test.sh              # whole suite, then the verl tests in .venv-verl
#   bash scripts/test.sh -m "not slow" tests/fusion   # extra arguments go to pytest (main run only)
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup-system.sh
bash scripts/setup.sh all,dev
bash scripts/setup-robotics.sh
bash scripts/setup-verl.sh  # verl pins its own stack: its tests run in .venv-verl (below)
bash scripts/check-core-install.sh  # core-only venv at the gymnasium floor: collects, skips extras
# everything above installed them: a robot test that cannot run is a failure, not a skip
export WMRL_REQUIRED_MARKERS="${WMRL_REQUIRED_MARKERS:+$WMRL_REQUIRED_MARKERS,}robosuite,libero,torch"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
if [ "$#" -gt 0 ]; then
    exec .venv/bin/python -m pytest --timeout=900 "$@"
fi
status=0
# user-facing text without internal references (each finding: file, line, pattern)
bash scripts/check-docs.sh || status=$?
# the API reference from the docstrings, warnings as errors (its own venv: .venv-docs)
bash scripts/build-docs.sh || status=$?
.venv/bin/python -m pytest --timeout=900 || status=$?
# the local sandbox's tests again without root (jobs then keep the caller's uid)
if [ "$(id -u)" -eq 0 ]; then
    bash scripts/test-nonroot.sh || status=$?
else
    echo "scripts/test.sh: not root: the non-root sandbox pass ran as the main run itself"
fi
# the verl tests, against the real verl package in its own venv; a skip there is a failure
WMRL_REQUIRED_MARKERS="$WMRL_REQUIRED_MARKERS,verl" .venv-verl/bin/python -m pytest \
    --timeout=900 tests/integrations/test_verl.py wmrl_env/integrations/verl || status=$?
exit "$status"
