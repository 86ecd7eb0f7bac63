#!/usr/bin/env bash
# Build the DockerSandbox image without an image registry: mmdebstrap a minimal Debian
# bookworm with the packages in packages.txt (Python, numpy, pandas, scikit-learn) from a
# Debian mirror, deletes the datasets the packages ship (hide-datasets.sh), then `docker
# import`s it. The tag is a hash of this recipe (this file, packages.txt and
# hide-datasets.sh): a second build finds the image and returns at once.
#
#   bash envs/sandbox_image/build.sh              # build or reuse; prints the tag last
#   bash envs/sandbox_image/build.sh --print-tag  # print the tag only
#   bash envs/sandbox_image/build.sh --force      # rebuild even if the tag exists
#
# Needs root, mmdebstrap and a running Docker engine. Environment:
#   WMRL_DEBIAN_MIRROR  the mirror (default http://deb.debian.org/debian)
#   WMRL_DEB_CACHE      a directory that keeps the downloaded .debs for the next build
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
tag="wmrl-sandbox:$(cat "$here/build.sh" "$here/packages.txt" "$here/hide-datasets.sh" | sha256sum | cut -c1-12)"
mirror="${WMRL_DEBIAN_MIRROR:-http://deb.debian.org/debian}"

case "${1:-}" in
    --print-tag) echo "$tag"; exit 0 ;;
    --force) force=1 ;;
    "") force=0 ;;
    *) echo "usage: $0 [--print-tag|--force]" >&2; exit 2 ;;
esac

if [ "$force" = 0 ] && docker image inspect "$tag" >/dev/null 2>&1; then
    echo "==> $tag already built" >&2
    echo "$tag"
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "building the sandbox image needs root (mmdebstrap); try: sudo $0" >&2
    exit 1
fi
command -v mmdebstrap >/dev/null || { echo "mmdebstrap missing: apt-get install mmdebstrap" >&2; exit 1; }

# unpacking ~100 packages is most of the time: on a RAM disk when there is one
if [ -z "${TMPDIR:-}" ] && [ "$(df -Pk /dev/shm 2>/dev/null | awk 'NR==2 {print $4}')" -gt 3000000 ]; then
    export TMPDIR=/dev/shm
fi
work="$(mktemp -d "${TMPDIR:-/var/tmp}/wmrl-sandbox-image.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# scipy declares a dependency on pythran (a compiler it needs only to build), which drags
# gcc, g++ and boost (~500 MB) in: an empty stand-in package satisfies it
mkdir -p "$work/repo" "$work/stub/DEBIAN"
cat >"$work/stub/DEBIAN/control" <<'CONTROL'
Package: python3-pythran
Version: 99:0-wmrl
Architecture: all
Maintainer: wmrl-env <wmrl-env@localhost>
Description: empty stand-in for pythran, needed only to build scipy
CONTROL
dpkg-deb --build "$work/stub" "$work/repo/python3-pythran.deb" >/dev/null
(cd "$work/repo" && dpkg-deb -f python3-pythran.deb && printf 'Filename: ./python3-pythran.deb\nSize: %s\nSHA256: %s\n\n' \
    "$(stat -c %s python3-pythran.deb)" "$(sha256sum python3-pythran.deb | cut -d' ' -f1)") >"$work/repo/Packages"

cache=()
if [ -n "${WMRL_DEB_CACHE:-}" ]; then
    mkdir -p "$WMRL_DEB_CACHE"
    cache=(--skip=download/empty --skip=essential/unlink
        --setup-hook="mkdir -p \"\$1\"/var/cache/apt/archives && cp $WMRL_DEB_CACHE/*.deb \"\$1\"/var/cache/apt/archives/ 2>/dev/null || true"
        --customize-hook="sync-out /var/cache/apt/archives $WMRL_DEB_CACHE")
fi
packages="$(grep -v '^\s*\(#\|$\)' "$here/packages.txt" | paste -sd, -)"
echo "==> mmdebstrap bookworm ($packages) from $mirror" >&2
mmdebstrap --variant=essential --include="$packages" "${cache[@]}" \
    --customize-hook="sh '$here/hide-datasets.sh' \"\$1\"" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    bookworm "$work/root.tar" "deb $mirror bookworm main" "deb [trusted=yes] copy://$work/repo ./" >&2
echo "==> docker import $tag" >&2
docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'WORKDIR /job' \
    --change 'CMD ["python3"]' \
    --change "LABEL wmrl-env.recipe=$tag" \
    "$work/root.tar" "$tag" >&2
echo "$tag"
