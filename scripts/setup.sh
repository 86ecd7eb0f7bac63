#!/usr/bin/env bash
# Create ./.venv and install wmrl-env (editable) with the given extras.
#
#   bash scripts/setup.sh            # core + bench extras
#   bash scripts/setup.sh all,dev    # everything the test suite uses
#
# torch is pinned through constraints/cpu.txt so that a CPU machine never pulls a CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."

extras="${1:-bench}"
python="${PYTHON:-python3}"
venv="${VENV:-.venv}"

if [ ! -x "$venv/bin/python" ]; then
    echo "==> creating $venv"
    "$python" -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip install --quiet --constraint constraints/cpu.txt)
"${pip[@]}" --upgrade pip "setuptools>=77" wheel
echo "==> installing wmrl-env[$extras] into $venv"
"${pip[@]}" --editable ".[$extras]"

# robosuite 1.5.2 pins mink 0.0.5, which declares numpy<2 and so drags NumPy below 2, which
# breaks pandas/pyarrow builds made for NumPy 2. robosuite, MuJoCo and mink run on NumPy 2
# (the robosuite tests check it), so NumPy 2 goes back in; pip reports the declared conflict.
if "$venv/bin/python" -c "import robosuite" 2>/dev/null \
    && ! "$venv/bin/python" -c 'import numpy, sys; sys.exit(int(numpy.__version__.split(".")[0]) < 2)'; then
    echo "==> robosuite pulled NumPy below 2 (mink's pin): reinstalling NumPy 2 in $venv"
    "${pip[@]}" "numpy>=2,<3"
fi

# The local sandbox refuses untrusted programs without bubblewrap (it fails closed): install
# it where we can (root with apt-get), else say how.
if ! command -v bwrap >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "==> apt-get install bubblewrap (the local sandbox's isolation)"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends bubblewrap >/dev/null
    else
        echo "==> bubblewrap is not installed: the local sandbox refuses untrusted programs." >&2
        echo "    Install it (sudo apt-get install bubblewrap); until then only the task suite's" >&2
        echo "    own programs run, under resource limits, where WMRL_ALLOW_WEAK_ISOLATION=1." >&2
    fi
fi
