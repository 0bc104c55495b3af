#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, and runs every test (Catch2
# unit tests and the multi-process/FUSE integration tests) through CTest, then the lock
# analysis build and each fuzz target briefly. Arguments go to ctest (and skip the fuzz smoke run).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
(cd "${BUILD_DIR:-build}" && ctest --output-on-failure --timeout 900 -j "${KELP_TEST_JOBS:-2}" "$@")
# clang's lock analysis (-Wthread-safety) over shared/, volume/ and filer/: a compile-only
# clang build in build-tsa/ (skipped with a message where clang is missing).
# KELP_THREAD_SAFETY=0 skips it. scripts/thread_safety.sh.
if [ "${KELP_THREAD_SAFETY:-1}" != 0 ] && [ $# -eq 0 ]; then
  scripts/thread_safety.sh
fi
# Every libFuzzer target for a few seconds on its seed corpus (a clang build of the targets
# alone, in build-fuzz/; skipped with a message where clang is missing). KELP_FUZZ_SECONDS=0
# skips it. docs/fuzzing.md.
if [ "${KELP_FUZZ_SECONDS:-3}" != 0 ] && [ $# -eq 0 ]; then
  scripts/fuzz.sh smoke "${KELP_FUZZ_SECONDS:-3}"
fi
