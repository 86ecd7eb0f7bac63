#!/usr/bin/env bash
# The local sandbox's tests again as an unprivileged user: CI runs as root, where the sandbox
# gives every job a uid of its own; without root, bubblewrap runs in a user namespace and
# jobs keep the caller's uid, which is where a writable /dev or a shared /dev/shm would show.
#
#   bash scripts/test-nonroot.sh                # as root: creates the user wmrl-test
#   bash scripts/test-nonroot.sh -k warm        # extra arguments go to pytest
#
# The interpreter, venv or checkout may sit below a folder the user cannot enter (pyenv under
# a 0700 /root); the user then sees them in a private mount namespace (that folder an empty
# tmpfs holding only them), nothing else of it.
set -euo pipefail
cd "$(dirname "$0")/.."
user=wmrl-test
python=${WMRL_PYTHON:-.venv/bin/python}
if [ "$(id -u)" -ne 0 ]; then
    echo "scripts/test-nonroot.sh: run it as root (it switches to the user $user)" >&2
    exit 2
fi
id -u "$user" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$user"
# without unprivileged user namespaces bubblewrap cannot work for the user, and the sandbox
# refuses to run (fail closed): say so; a failure where CI requires the pass ("nonroot" in
# WMRL_REQUIRED_MARKERS), a skip with its reason elsewhere
if ! why=$(runuser -u "$user" -- bwrap --unshare-user --ro-bind / / true 2>&1); then
    echo "scripts/test-nonroot.sh: SKIPPED: bubblewrap does not work without root here: $why" >&2
    case ",${WMRL_REQUIRED_MARKERS:-}," in *,nonroot,*) exit 1 ;; esac
    exit 0
fi
# what the user must reach: the interpreter, the venv, this checkout
base=$("$python" -c 'import os, sys; print(os.path.realpath(sys.base_prefix))')
venv=$("$python" -c 'import os, sys; print(os.path.realpath(sys.prefix))')
tests=(tests/sandboxes/test_least_privilege.py tests/sandboxes/test_hostile_programs.py
       tests/sandboxes/test_warm_pool.py tests/sandboxes/test_local_sandbox.py)
BASE=$base VENV=$venv exec unshare --mount --propagation private -- /bin/sh -eu -c '
    user=$1; python=$2; shift 2
    # a folder on the way to what the user must reach that the user cannot enter (pyenv
    # under a 0700 /root, a CI clone below a private folder) becomes an empty tmpfs in this
    # private mount namespace, holding only those paths, bound back in
    blocked=""
    for path in "$BASE" "$VENV" "$PWD"; do
        walked=""
        for part in $(echo "$path" | tr / " "); do
            walked="$walked/$part"
            if ! runuser -u "$user" -- test -x "$walked"; then
                case " $blocked " in *" $walked "*) ;; *) blocked="$blocked $walked" ;; esac
                break
            fi
        done
    done
    if [ -n "$blocked" ]; then
        keep=$(mktemp -d)
        for path in "$BASE" "$VENV" "$PWD"; do
            mkdir -p "$keep$path"
            mount --rbind "$path" "$keep$path"
        done
        for folder in $blocked; do
            mount -t tmpfs -o mode=0755,size=1m tmpfs "$folder"
        done
        for path in "$BASE" "$VENV" "$PWD"; do
            mkdir -p "$path"
            mount --rbind "$keep$path" "$path"
        done
        cd "$PWD"
    fi
    exec runuser -u "$user" -- env HOME=/tmp PATH=/usr/local/bin:/usr/bin:/bin \
        HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONDONTWRITEBYTECODE=1 WMRL_NONROOT_PASS=1 \
        "$python" -m pytest -p no:cacheprovider --timeout=900 -m "not docker and not ray" "$@"
' sh "$user" "$python" "${tests[@]}" "$@"
