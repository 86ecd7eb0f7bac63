#!/usr/bin/env bash
# Set up wmrl-env on a fresh machine and run the main job on its embedded defaults.
#
#   bash scripts/bench.sh             # extra arguments go to the command
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh bench
exec .venv/bin/wmrl demo "$@"
