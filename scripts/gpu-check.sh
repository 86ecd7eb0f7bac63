#!/usr/bin/env bash
# GPU readiness: throughput of the language-model paths on random-weight models of real size
# (a Qwen2.5-0.5B shape and a Qwen3-4B-like shape; throughput does not depend on the weights),
# written to one JSON (default runs/gpu_check.json):
#
#   bash scripts/gpu-check.sh                      # on a machine with a CUDA GPU
#   bash scripts/gpu-check.sh --sizes tiny --device cpu --num-programs 16   # a CPU dry run
#
# Measures the vLLM world-model scorer (programs/s; needs `pip install 'wmrl-env[vllm]'`,
# skipped with the reason otherwise), a CausalLMScorer forward pass per batch, its online update
# (a LoRA step on 32 anchors) and that update served by vLLM through a LoRA adapter, one TRL GRPO
# step with WorldModelReward (0.5B and tiny only: a full 4B step needs ~64 GB of optimizer state).
# Extra arguments go to `python -m wmrl_env.bench.gpu_check` (see --help).
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-.venv/bin/python}"
[ -x "$python" ] || python=python3
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
"$python" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
exec "$python" -m wmrl_env.bench.gpu_check "$@"
