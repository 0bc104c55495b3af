#!/usr/bin/env bash
# Configures (once) and builds Kelp into build/ (or $BUILD_DIR). Extra arguments go to cmake
# at configure time, e.g. -DKELP_SANITIZE=address.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja "$@" >/dev/null
fi
ninja -C "$BUILD_DIR" ${KELP_BUILD_JOBS:+-j "$KELP_BUILD_JOBS"}
