#!/usr/bin/env bash
# Builds the Debian package: build/kelp_<version>_amd64.deb (CPack, cmake/KelpPackage.cmake).
# Install it with `apt install ./build/kelp_*.deb`; packaging/test-deb.sh checks that on a
# clean Debian 12 made with debootstrap.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
BUILD_DIR=${BUILD_DIR:-build}
[ -f "$BUILD_DIR/build.ninja" ] || cmake -S . -B "$BUILD_DIR" -G Ninja >/dev/null
ninja -C "$BUILD_DIR" ${KELP_BUILD_JOBS:+-j "$KELP_BUILD_JOBS"} kelp kelp_man
cd "$BUILD_DIR"
cpack -G DEB >cpack.log 2>&1 || { cat cpack.log >&2; exit 1; }
ls -1 "$PWD"/kelp_*.deb
