#!/usr/bin/env bash
# Builds with a sanitizer and runs the unit tests (CTest label "unit") under it.
#   scripts/sanitize.sh address   # ASan + UBSan, into build-asan/
#   scripts/sanitize.sh thread    # TSan, into build-tsan/
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:-address}
case "$kind" in
  address) dir=build-asan ;;
  thread) dir=build-tsan ;;
  *) echo "usage: $0 address|thread" >&2; exit 2 ;;
esac
scripts/install-deps.sh
BUILD_DIR=$dir scripts/build.sh -DKELP_SANITIZE="$kind" -DCMAKE_BUILD_TYPE=Debug
supp=$(pwd)/scripts/tsan.supp
cd "$dir"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$supp}
ctest --output-on-failure -L unit -j 2 "${@:2}"
