#!/usr/bin/env bash
# Resident memory of `kelp mount` while one GIB GiB file is written into it (dd from
# /dev/zero, bs=1M, conv=fsync) and read back: VmRSS sampled every 0.5 s, VmHWM at the end.
# The bound (docs/mount.md) is 300 MiB + -writeBufferSizeMB. The file is deleted afterwards;
# it needs GIB GiB free on the disk under KB_DIR.
#
#   GIB=10  WRITE_BUFFER_MB=256  MOUNT_FLAGS="" (extra kelp mount flags)  KELP  KB_DIR  KB_KEEP
set -u
# shellcheck source=bench/lib/kelp_bench.sh
source "$(dirname "$0")/../lib/kelp_bench.sh"
GIB=${GIB:-10}
WRITE_BUFFER_MB=${WRITE_BUFFER_MB:-256}
MOUNT_FLAGS=${MOUNT_FLAGS:-}

free_kib=$(df -k --output=avail "$KB_DIR" | tail -1)
[ "$free_kib" -gt $(((GIB + 4) << 20)) ] || kb_die "not enough room under $KB_DIR for $GIB GiB"
kb_log "$(kb_machine)"
kb_start_server
# shellcheck disable=SC2086
kb_mount "$KB_DIR/kelp" -writeBufferSizeMB="$WRITE_BUFFER_MB" -cacheDir="$KB_DIR/cache" $MOUNT_FLAGS
pid=${KB_MOUNT_PID[$KB_DIR/kelp]}
# sample PHASE CMD...: runs CMD while sampling the mount's VmRSS; prints the phase's peak.
sample() {
  local phase=$1 peak=0 rss t0 t1 load
  shift
  load=$(kb_load)
  t0=$(date +%s.%N)
  "$@" &
  local job=$!
  while kill -0 "$job" 2>/dev/null; do
    rss=$(kb_rss_kib "$pid")
    [ "${rss:-0}" -gt "$peak" ] && peak=$rss
    sleep 0.5
  done
  wait "$job" || kb_die "$phase failed"
  t1=$(date +%s.%N)
  printf '%-6s peak VmRSS %5d MiB, %s MiB/s, load %s\n' "$phase" $((peak >> 10)) \
    "$(python3 -c "import sys; print('%.0f' % ($GIB * 1024 / (float(sys.argv[2]) - float(sys.argv[1]))))" "$t0" "$t1")" "$load"
}
sample write dd if=/dev/zero of="$KB_DIR/kelp/big" bs=1M count=$((GIB << 10)) conv=fsync status=none
kb_drop_caches
sample read dd if="$KB_DIR/kelp/big" of=/dev/null bs=1M status=none
hwm=$(awk '/^VmHWM/ { print $2 }' "/proc/$pid/status")
echo "VmHWM $((hwm >> 10)) MiB; bound 300 + $WRITE_BUFFER_MB = $((300 + WRITE_BUFFER_MB)) MiB"
rm -f "$KB_DIR/kelp/big"
