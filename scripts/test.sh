#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, and runs every test (Catch2
# unit tests and the multi-process/FUSE integration tests) through CTest, then each fuzz
# target briefly. Arguments go to ctest (and skip the fuzz smoke run).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
(cd "${BUILD_DIR:-build}" && ctest --output-on-failure --timeout 900 -j "${KELP_TEST_JOBS:-2}" "$@")
# Every libFuzzer target for a few seconds on its seed corpus (a clang build of the targets
# alone, in build-fuzz/; skipped with a message where clang is missing). KELP_FUZZ_SECONDS=0
# skips it. docs/fuzzing.md.
if [ "${KELP_FUZZ_SECONDS:-3}" != 0 ] && [ $# -eq 0 ]; then
  scripts/fuzz.sh smoke "${KELP_FUZZ_SECONDS:-3}"
fi
