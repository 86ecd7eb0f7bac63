#!/usr/bin/env bash
# Start the Docker engine in the background if it is not running (no systemd in CI): the
# DockerSandbox tests need it. docker.io comes from scripts/apt-packages.txt.
set -euo pipefail

if docker info >/dev/null 2>&1; then
    echo "    docker engine already running"
    exit 0
fi
if ! command -v dockerd >/dev/null; then
    echo "    dockerd not installed: Docker tests will skip" >&2
    exit 0
fi
log=/var/log/wmrl-dockerd.log
nohup dockerd >"$log" 2>&1 &
for _ in $(seq 1 120); do  # at most 60 s
    if docker info >/dev/null 2>&1; then
        echo "    docker engine started (log: $log)"
        exit 0
    fi
    sleep 0.5
done
echo "    dockerd did not answer within 60 s; last lines of $log:" >&2
tail -n 20 "$log" >&2
exit 0
