#!/usr/bin/env bash
# The floor under a FUSE file system's metadata rates on this machine: `metaops` (the shared
# harness's workload d: create, stat, unlink of META_N empty files in one directory, caches
# dropped before stat and unlink) on null_fuse (bench/mount/null_fuse.c: a FUSE file system
# that answers every request at once from memory, on one thread) and on a fresh `kelp server`
# + `kelp mount -chunkSizeLimitMB=4 -cacheCapacityMB=1000`, in turn, ROUNDS times, so that the
# host's drift hits both alike. The gap between the two lines is what Kelp adds to the kernel's
# FUSE round trips (the filer round trip inside a create, the mount's own work); the null line
# is what no FUSE file system can beat here. Also the processes' CPU ticks per phase.
#
#   ROUNDS=3  META_N=10000  KELP  KB_DIR  KB_KEEP (see bench/lib/kelp_bench.sh)
# Needs root (drop_caches, mounts), gcc and libfuse3-dev (scripts/install-deps.sh installs both).
set -u
# shellcheck source=bench/lib/kelp_bench.sh
source "$(dirname "$0")/../lib/kelp_bench.sh"
ROUNDS=${ROUNDS:-3}
META_N=${META_N:-10000}
METAOPS=$KB_DIR/metaops
NULLFS=$KB_DIR/null_fuse
gcc -O2 -o "$METAOPS" "$KB_ROOT/bench/compare/metaops.c" || kb_die "gcc metaops.c failed"
# shellcheck disable=SC2046
gcc -O2 -Wall -Wextra -o "$NULLFS" "$KB_ROOT/bench/mount/null_fuse.c" $(pkg-config --cflags --libs fuse3) ||
  kb_die "gcc null_fuse.c failed"

ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# phases LABEL DIR PIDS...: one line of create/stat/unlink ops/s in DIR and the PIDS' CPU ticks
# in each.
phases() {
  local label=$1 dir=$2 line phase out t0 t1 p
  shift 2
  line="$label:"
  for phase in create stat unlink; do
    [ "$phase" = create ] || kb_drop_caches
    t0=0
    for p in "$@"; do t0=$((t0 + $(ticks "$p"))); done
    out=$("$METAOPS" "$phase" "$dir" "$META_N") || kb_die "metaops $phase failed on $label"
    t1=0
    for p in "$@"; do t1=$((t1 + $(ticks "$p"))); done
    line+=" $phase $(awk '{ printf "%.0f", $4 }' <<<"$out")/s ($((t1 - t0)) ticks)"
  done
  echo "$line  load $(kb_load)"
}

null_round() {
  local mnt=$KB_DIR/null pid i
  mkdir -p "$mnt"
  "$NULLFS" "$mnt" &
  pid=$!
  KB_PIDS+=("$pid")  # undone by kb_teardown should a step fail
  KB_MOUNTS+=("$mnt")
  for ((i = 0; i < 100; i++)); do mountpoint -q "$mnt" && break; sleep 0.05; done
  mountpoint -q "$mnt" || kb_die "null_fuse did not mount"
  phases "null_fuse" "$mnt" "$pid"  # in its root: it has no subdirectories
  fusermount3 -u "$mnt" 2>/dev/null || umount -l "$mnt"
  wait "$pid"
  local keep=() q
  for q in "${KB_PIDS[@]}"; do [ "$q" = "$pid" ] || keep+=("$q"); done
  KB_PIDS=("${keep[@]}")
}

kelp_round() {
  local mnt=$KB_DIR/kelp-$1
  kb_start_server
  kb_mount "$mnt" -chunkSizeLimitMB=4 -cacheCapacityMB=1000 -cacheDir="$KB_DIR/cache-$1"
  mkdir "$mnt/meta"
  phases "kelp     " "$mnt/meta" "${KB_MOUNT_PID[$mnt]}" "$KB_SERVER_PID"
  kb_unmount "$mnt"
  kb_stop_server
}

echo "metaops of $META_N files, $ROUNDS rounds; ticks: the file system's processes (1 tick = 10 ms)"
for ((r = 1; r <= ROUNDS; r++)); do
  null_round
  kelp_round "$r"
done
