#!/usr/bin/env bash
# libFuzzer targets (docs/fuzzing.md). Builds them with clang + ASan/UBSan into build-fuzz/
# (or $FUZZ_BUILD_DIR), a build of its own: the normal gcc build never needs clang.
#   scripts/fuzz.sh build                 # configure (once) and build every target
#   scripts/fuzz.sh list                  # the targets
#   scripts/fuzz.sh smoke [SECONDS]       # each target on its seed corpus for SECONDS (5): CI
#   scripts/fuzz.sh run TARGET SECONDS    # one long run; new inputs go to build-fuzz/corpus/TARGET,
#                                         # a crash to build-fuzz/crashes/TARGET-*
# Exits 0 with a message when clang is missing (install-deps installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${FUZZ_BUILD_DIR:-build-fuzz}
SEEDS=fuzz/corpus

find_clang() {
  for c in clang++-14 clang++; do
    if command -v "$c" >/dev/null 2>&1; then echo "$c"; return 0; fi
  done
  return 1
}

build() {
  if ! CXX=$(find_clang); then
    echo "fuzz: clang++ not found; skipping the fuzz targets (scripts/install-deps.sh installs clang-14)" >&2
    exit 0
  fi
  CC=${CXX/clang++/clang}
  if [ ! -f "$BUILD/build.ninja" ]; then
    CC=$CC CXX=$CXX cmake -S . -B "$BUILD" -G Ninja -DKELP_FUZZ=ON -DCMAKE_BUILD_TYPE=Release >/dev/null
  fi
  ninja -C "$BUILD" ${KELP_BUILD_JOBS:+-j "$KELP_BUILD_JOBS"} kelp_fuzzers
}

targets() {
  find "$BUILD/fuzz" -maxdepth 1 -type f -perm -u+x -name '*_fuzz' -printf '%f\n' | sort
}

# run_one TARGET SECONDS LOGNAME [extra libFuzzer flags...]: prints one summary line.
run_one() {
  local t=$1 secs=$2 logname=$3; shift 3
  if [ ! -d "$SEEDS/$t" ]; then
    echo "fuzz: $t has no seed corpus $SEEDS/$t" >&2
    return 1
  fi
  mkdir -p "$BUILD/corpus/$t" "$BUILD/crashes" "$BUILD/logs"
  local log="$BUILD/logs/$logname.log"
  local rc=0
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
    "$BUILD/fuzz/$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$BUILD/crashes/$t-" "$@" "$BUILD/corpus/$t" "$SEEDS/$t" >"$log" 2>&1 || rc=$?
  local execs cov ft
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  if [ "$rc" -ne 0 ]; then
    echo "fuzz: $t FAILED after ${execs:-?} executions (log: $log)"
    grep -E 'ERROR|FUZZ_CHECK|runtime error|Test unit written' "$log" | head -5 >&2 || true
    return 1
  fi
  echo "fuzz: $t ok: ${secs}s, ${execs:-?} executions, cov ${cov:-?}, ft ${ft:-?}, corpus $(ls "$BUILD/corpus/$t" | wc -l) new + $(ls "$SEEDS/$t" | wc -l) seeds"
}

cmd=${1:-smoke}
case "$cmd" in
  build) build ;;
  list) build >/dev/null; targets ;;
  smoke)
    build >/dev/null
    [ -d "$BUILD/fuzz" ] || exit 0  # clang missing: build() said so
    passed=0 failed=0
    for t in $(targets); do
      if run_one "$t" "${2:-5}" "$t.smoke"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
    done
    echo "fuzz: $passed passed, $failed failed"
    [ "$failed" -eq 0 ] ;;
  run)
    [ $# -ge 3 ] || { echo "usage: $0 run TARGET SECONDS" >&2; exit 2; }
    build >/dev/null
    run_one "$2" "$3" "$2" ;;
  *) echo "usage: $0 build|list|smoke [SECONDS]|run TARGET SECONDS" >&2; exit 2 ;;
esac
