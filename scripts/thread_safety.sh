#!/usr/bin/env bash
# clang's lock analysis (-Wthread-safety) over the directories KELP_THREAD_SAFETY_DIRS names
# in CMakeLists.txt (shared/, volume/, filer/): a clang build in build-tsa/ (or $TSA_BUILD_DIR)
# that only compiles their objects (no link, no test), with every analysis warning an error.
# scripts/test.sh runs it; ccache makes a rerun cheap. Exits 0 with a message when clang is
# missing (scripts/install-deps.sh installs clang-14). CONTRIBUTING.md says how to annotate.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${TSA_BUILD_DIR:-build-tsa}

CXX=
for c in clang++-14 clang++; do
  if command -v "$c" >/dev/null 2>&1; then CXX=$c; break; fi
done
if [ -z "$CXX" ]; then
  echo "thread-safety: clang++ not found; skipped (scripts/install-deps.sh installs clang-14)" >&2
  exit 0
fi
CC=${CXX/clang++/clang}
if [ ! -f "$BUILD/build.ninja" ]; then
  # -O0 and no -g: the analysis needs neither, and they make the compile cheaper.
  CC=$CC CXX=$CXX cmake -S . -B "$BUILD" -G Ninja -DKELP_THREAD_SAFETY=ON \
    -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG=-O0 -DCMAKE_CXX_FLAGS_DEBUG=-O0 >/dev/null
fi
# Reconfigures if CMakeLists.txt changed (the list of directories may have).
ninja -C "$BUILD" build.ninja >/dev/null
# thread_safety.txt (written by CMake): "dirs D..." and "skip PATH..." (paths from the root).
read -r -a dirs <<<"$(sed -n 's/^dirs //p' "$BUILD/thread_safety.txt" | tr ';' ' ')"
read -r -a skips <<<"$(sed -n 's/^skip //p' "$BUILD/thread_safety.txt" | tr ';' ' ')"
# An object is D/CMakeFiles/TARGET.dir/SOURCE-under-D.o
pattern="^($(IFS='|'; echo "${dirs[*]}"))/CMakeFiles/[^/:]+\.dir/[^:]*\.o:"
skip='^$'
for s in "${skips[@]}"; do skip+="|^${s%%/*}/CMakeFiles/[^/]+\.dir/${s#*/}"; done
mapfile -t objects < <(ninja -C "$BUILD" -t targets all | grep -oE "$pattern" | tr -d ':' |
                       grep -vE "$skip")
if [ "${#objects[@]}" -eq 0 ]; then
  echo "thread-safety: no objects found under ${dirs[*]}" >&2
  exit 1
fi
log="$BUILD/thread_safety.log"
rc=0
ninja -C "$BUILD" ${KELP_BUILD_JOBS:+-j "$KELP_BUILD_JOBS"} -k 0 "${objects[@]}" >"$log" 2>&1 || rc=$?
warnings=$(grep -c "warning:\|error:" "$log" || true)
if [ "$rc" -ne 0 ] || [ "$warnings" -ne 0 ]; then
  grep -E 'warning:|error:' "$log" | sort -u | head -50 >&2
  echo "thread-safety: FAILED: $warnings warnings/errors in ${dirs[*]} (log: $log)" >&2
  exit 1
fi
echo "thread-safety: ok: ${#objects[@]} objects of ${dirs[*]} compiled with -Wthread-safety, no warnings"
