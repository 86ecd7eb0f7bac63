#!/usr/bin/env bash
# Fail on internal references (tracker numbers, branch names, work periods, team roles) in what
# a user reads: README, CHANGELOG, docs/, docstrings and strings of the package, examples and
# benchmarks, figure names. Each finding names its file, line and pattern.
#
#   bash scripts/check-docs.sh                 # the whole repository
#   bash scripts/check-docs.sh README.md docs/fusion.md   # only these files
set -euo pipefail
cd "$(dirname "$0")/.."
python=python3
[ -x .venv/bin/python ] && python=.venv/bin/python
exec "$python" scripts/check_docs.py "$@"
