#!/usr/bin/env bash
# Install and start the system services the full test suite needs (Docker engine, sandbox
# tools, headless rendering). Needs root and apt-get; elsewhere it says what it skipped and
# the tests that need those services skip with that reason.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "==> not root or no apt-get: skipping system packages and services" >&2
    exit 0
fi

packages=$(grep -v '^\s*#' scripts/apt-packages.txt | xargs)
missing=$(for p in $packages; do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done | xargs)
if [ -n "$missing" ]; then
    echo "==> apt-get install $missing"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

for step in scripts/system.d/*.sh; do
    [ -e "$step" ] || continue
    echo "==> $step"
    bash "$step"
done
