#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, and runs every test (Catch2
# unit tests and the multi-process/FUSE integration tests) through CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
cd "${BUILD_DIR:-build}"
ctest --output-on-failure --timeout 900 -j "${KELP_TEST_JOBS:-2}" "$@"
