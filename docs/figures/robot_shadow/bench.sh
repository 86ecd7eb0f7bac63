#!/bin/bash
# the bench check: fused arms, seeds 0 and 8, closed vs open shadow (cut-down --full)
cd /work/wt/shadow
for shadow in closed open; do
  for seed in 0 8; do
    echo "== $shadow seed $seed $(date -u +%H:%M:%S)"
    HF_HUB_OFFLINE=1 .venv/bin/wmrl bench --domain robosuite --full --arms wmrl ppi \
      --first-seed $seed --seeds 1 --eval-starts 20 --interim-eval-starts 8 \
      --shadow $shadow --cache-dir runs/base_policy --out runs/shadow/bench-$shadow
  done
done
echo "== done $(date -u +%H:%M:%S)"
