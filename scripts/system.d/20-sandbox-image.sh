#!/usr/bin/env bash
# Build the DockerSandbox image (offline from any image registry, cached by recipe hash:
# instant when it exists). Runs after 10-docker.sh; without an engine it says so and skips.
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! docker info >/dev/null 2>&1; then
    echo "    no Docker engine: sandbox image not built (Docker tests will skip)" >&2
    exit 0
fi
start=$(date +%s)
if ! tag=$(bash envs/sandbox_image/build.sh); then
    echo "    building the sandbox image failed: Docker tests will skip" >&2
    exit 0
fi
echo "    sandbox image $tag ready in $(( $(date +%s) - start )) s"
