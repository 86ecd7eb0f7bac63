#!/usr/bin/env bash
# Create the verl interpreter .venv-verl (wmrl-env[verl,dev], verl 0.9.1 on the CPU torch).
#
#   bash scripts/setup-verl.sh
#   .venv-verl/bin/python -m pytest tests/integrations/test_verl.py wmrl_env/integrations/verl
#
# verl pins its own transformers/ray/tensordict stack, so it gets its own interpreter, like
# LIBERO (scripts/setup-robotics.sh); torch stays the CPU wheel through constraints/cpu.txt.
# About 1.9 GB; docs/verl.md records the install time.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VERL_VENV:-.venv-verl}" bash scripts/setup.sh verl,dev
