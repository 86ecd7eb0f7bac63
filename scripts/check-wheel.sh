#!/usr/bin/env bash
# wmrl-env as a user installs it, away from this checkout:
#  1. exports HEAD with `git archive` (committed files only, never the working tree) and builds
#     the sdist, then the wheel from the sdist (python -m build, in a build venv of its own);
#  2. checks that both hold every file of the package, its data included
#     (tests/packaging/distribution_files.py), and prints their sizes;
#  3. installs the wheel with the extras the quick bench needs (tasks,bench; torch, where an
#     extra pulls it, pinned by constraints/cpu.txt) into a fresh venv in a temp dir outside
#     the clone;
#  4. from a directory outside the clone, runs the README's quick-start block and
#     `wmrl bench` on a small setting (1 seed, 4 rounds, arms real and wmrl).
# The quick-start block is the first ```python block under the README heading that contains
# "Quick start" (any case; scripts/readme_quickstart.py states the rule, what the block is
# given, `my_policy`, and what it must do). Each step prints its seconds.
#
#   bash scripts/check-wheel.sh     # a few minutes on 2 cores with a warm pip cache
#   WMRL_KEEP_WHEEL_CHECK=1 bash scripts/check-wheel.sh   # keep the temp dir (printed)
set -euo pipefail
cd "$(dirname "$0")/.."
clone="$PWD"
python="${PYTHON:-python3}"
work="$(mktemp -d "${TMPDIR:-/tmp}/wmrl-wheel-check.XXXXXX")"
case "$work/" in "$clone"/*) echo "check-wheel: the temp dir $work is inside the clone" >&2; exit 1 ;; esac
if [ -z "${WMRL_KEEP_WHEEL_CHECK:-}" ]; then trap 'rm -rf "$work"' EXIT; fi
step() { echo "==> check-wheel: $* ($SECONDS s so far)"; }
pip_flags=(--quiet --constraint "$clone/constraints/cpu.txt")

step "exporting HEAD ($(git rev-parse --short HEAD)) to $work/src"
mkdir -p "$work/src" "$work/run"
git archive --format=tar HEAD | tar -x -C "$work/src"

step "building the sdist and, from it, the wheel"
"$python" -m venv "$work/build-venv"
"$work/build-venv/bin/python" -m pip install "${pip_flags[@]}" build 2>&1 | sed '/^WARNING: Location/d'
"$work/build-venv/bin/python" -m build --outdir "$work/dist" "$work/src" >"$work/build.log" 2>&1 \
    || { tail -40 "$work/build.log"; exit 1; }
wheel=$(ls "$work"/dist/wmrl_env-*.whl)
sdist=$(ls "$work"/dist/wmrl_env-*.tar.gz)
"$python" tests/packaging/distribution_files.py "$wheel" "$sdist"

step "installing the wheel[tasks,bench] into a fresh venv"
"$python" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install "${pip_flags[@]}" "$wheel[tasks,bench]" 2>&1 \
    | sed '/^WARNING: Location/d'

cd "$work/run"  # outside the clone: nothing from the checkout can be imported from here
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
# the quick bench runs only the task suite's own programs (see scripts/bench.sh)
export WMRL_ALLOW_WEAK_ISOLATION="${WMRL_ALLOW_WEAK_ISOLATION:-1}"
step "running the README's quick start from $PWD"
cp "$clone/scripts/readme_quickstart.py" "$clone/README.md" .
"$work/venv/bin/python" readme_quickstart.py README.md | tee quickstart.log
grep -q "from $work/venv/" quickstart.log \
    || { echo "check-wheel: wmrl_env was not imported from the installed wheel" >&2; exit 1; }

step "running wmrl bench on a small setting"
"$work/venv/bin/wmrl" bench --seeds 1 --rounds 4 --tuning-seeds 1 --arms real wmrl \
    --out "$work/run/bench" | tail -3
test -s "$work/run/bench/results.json"

step "done: the wheel and the sdist work on their own"
