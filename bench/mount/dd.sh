#!/usr/bin/env bash
# dd if=/dev/zero bs=1M count=COUNT conv=fsync into a kelp mount, then read back after
# dropping the kernel's caches, beside the local disk and bindfs of a local directory, in one
# run (issue 4). The kelp mount runs with its defaults (4 MiB chunks, 1000 MiB read cache with
# write-through: the read back may be served from that cache, as it is for a user).
# Prints one line per target: write MiB/s (including the fsync), read MiB/s, load average.
#
#   COUNT=1024  MOUNT_FLAGS="" (extra kelp mount flags)  KELP  KB_DIR  KB_KEEP
set -u
# shellcheck source=bench/lib/kelp_bench.sh
source "$(dirname "$0")/../lib/kelp_bench.sh"
COUNT=${COUNT:-1024}
MOUNT_FLAGS=${MOUNT_FLAGS:-}

# mibps SECONDS: COUNT MiB over SECONDS, as MiB/s.
mibps() { python3 -c "import sys; print('%.0f' % ($COUNT / float(sys.argv[1])))" "$1"; }
# timed CMD...: runs CMD, prints its wall time in seconds.
timed() {
  local t0 t1
  t0=$(date +%s.%N)
  "$@" 2>>"$KB_DIR/dd.err" || kb_die "$* failed: $(tail -2 "$KB_DIR/dd.err")"
  t1=$(date +%s.%N)
  python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$t0" "$t1"
}

kb_log "$(kb_machine)"
mkdir -p "$KB_DIR/local"
kb_bindfs "$KB_DIR/bindfs-src" "$KB_DIR/bindfs"
kb_start_server
# shellcheck disable=SC2086
kb_mount "$KB_DIR/kelp" -cacheDir="$KB_DIR/cache" $MOUNT_FLAGS
printf '%-8s %10s %10s %5s\n' target "write_MiB/s" "read_MiB/s" load
for target in local bindfs kelp; do
  f=$KB_DIR/$target/dd.bin
  load=$(kb_load)
  kb_drop_caches
  w=$(timed dd if=/dev/zero of="$f" bs=1M count="$COUNT" conv=fsync status=none)
  kb_drop_caches
  r=$(timed dd if="$f" of=/dev/null bs=1M status=none)
  printf '%-8s %10s %10s %5s\n' "$target" "$(mibps "$w")" "$(mibps "$r")" "$load"
  rm -f "$f"
done
