#!/usr/bin/env bash
# Set up wmrl-env on a fresh machine and run the main job on its embedded defaults.
#
#   bash scripts/bench.sh             # extra arguments go to the command
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh transformers,tasks,bench
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
exec .venv/bin/wmrl bench "$@"
