#!/usr/bin/env bash
# Set up wmrl-env on a fresh machine and run the main job on its embedded defaults.
#
#   bash scripts/bench.sh             # extra arguments go to the command
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh transformers,tasks,bench
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
# The bench runs only the task suite's own programs, so where bubblewrap cannot work (not
# installed and not root, or a container without namespaces) it may run them under resource
# limits: an explicit opt-in, warned about at start and recorded in every result's metadata
# (weak_isolation). Set WMRL_ALLOW_WEAK_ISOLATION=0 to refuse instead.
export WMRL_ALLOW_WEAK_ISOLATION="${WMRL_ALLOW_WEAK_ISOLATION:-1}"
exec .venv/bin/wmrl bench "$@"
