#!/usr/bin/env bash
# sysbench fileio rndrw on a kelp mount, with and without the tiered read cache, in one run
# (issue 5). For each -cacheCapacityMB in CACHES: a fresh `kelp server` + `kelp mount
# -chunkSizeLimitMB=4 -cacheCapacityMB=N`, `sysbench fileio --file-total-size=SIZE prepare`,
# then `run --file-test-mode=rndrw` for each thread count in THREADS (TIME seconds each, the
# kernel's caches dropped before each run so reads reach the mount), then cleanup and teardown.
# Prints one summary line per run: ops/s, MiB/s, latency, the mount cache's hit ratio during
# the run, the volume server's fdatasyncs per application fsync, and the load average.
#
#   CACHES="1000 0"  THREADS="1 16"  TIME=30  SIZE=1G  MOUNT_FLAGS="" (extra mount flags)
#   KELP=build/cmd/kelp  KB_DIR=/var/tmp/kelp-bench-PID  KB_KEEP=0 (see bench/lib/kelp_bench.sh)
set -u
# shellcheck source=bench/lib/kelp_bench.sh
source "$(dirname "$0")/../lib/kelp_bench.sh"
CACHES=${CACHES:-"1000 0"}
THREADS=${THREADS:-"1 16"}
TIME=${TIME:-30}
SIZE=${SIZE:-1G}
MOUNT_FLAGS=${MOUNT_FLAGS:-}
command -v sysbench >/dev/null || kb_die "sysbench is not installed (apt-get install sysbench)"

kb_log "$(kb_machine)"
printf '%-6s %-3s %9s %9s %9s %8s %8s %8s %8s %7s %9s %5s\n' cacheMB thr "reads/s" "writes/s" "fsyncs/s" \
  "rd_MiB/s" "wr_MiB/s" "lat_avg" "lat_p95" "hit%" "fdsync/fs" load
for cache in $CACHES; do
  kb_start_server
  mnt=$KB_DIR/mnt-$cache
  mp=$(kb_free_port)
  # shellcheck disable=SC2086
  kb_mount "$mnt" -chunkSizeLimitMB=4 -cacheCapacityMB="$cache" -cacheDir="$KB_DIR/cache-$cache" \
    -metricsPort="$mp" $MOUNT_FLAGS
  cd "$mnt" || kb_die "cd $mnt"
  sysbench fileio --file-total-size="$SIZE" prepare >"$KB_DIR/prepare-$cache.log" 2>&1 ||
    kb_die "sysbench prepare failed: $(tail -3 "$KB_DIR/prepare-$cache.log")"
  for t in $THREADS; do
    kb_drop_caches
    h0=$(kb_metric "127.0.0.1:$mp" kelp_cache_hits_total)
    m0=$(kb_metric "127.0.0.1:$mp" kelp_cache_misses_total)
    s0=$(kb_metric "$KB_VOLUME" kelp_volume_fdatasyncs_total)
    load=$(kb_load)
    out=$KB_DIR/run-$cache-$t.log
    sysbench fileio --file-total-size="$SIZE" --file-test-mode=rndrw --threads="$t" --time="$TIME" \
      --max-requests=0 --percentile=95 run >"$out" 2>&1 || kb_die "sysbench run failed: $(tail -3 "$out")"
    h=$(($(kb_metric "127.0.0.1:$mp" kelp_cache_hits_total) - h0))
    m=$(($(kb_metric "127.0.0.1:$mp" kelp_cache_misses_total) - m0))
    s=$(($(kb_metric "$KB_VOLUME" kelp_volume_fdatasyncs_total) - s0))
    python3 - "$out" "$cache" "$t" "$h" "$m" "$s" "$TIME" "$load" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
cache, t, h, m, s, secs, load = sys.argv[2:9]
def num(pat):
    x = re.search(pat, text)
    return float(x.group(1)) if x else float("nan")
fsyncs = num(r"fsyncs/s:\s+([\d.]+)")
hit = 100.0 * int(h) / (int(h) + int(m)) if int(h) + int(m) else float("nan")
per = int(s) / (fsyncs * float(secs)) if fsyncs > 0 else float("nan")
print("%-6s %-3s %9.0f %9.0f %9.0f %8.1f %8.1f %8.2f %8.2f %7.1f %9.2f %5s" % (
    cache, t, num(r"reads/s:\s+([\d.]+)"), num(r"writes/s:\s+([\d.]+)"), fsyncs,
    num(r"read, MiB/s:\s+([\d.]+)"), num(r"written, MiB/s:\s+([\d.]+)"),
    num(r"avg:\s+([\d.]+)"), num(r"95th percentile:\s+([\d.]+)"), hit, per, load))
PY
  done
  sysbench fileio --file-total-size="$SIZE" cleanup >/dev/null 2>&1
  cd / || true
  kb_unmount "$mnt"
  [ "$cache" = 0 ] || grep "cache: hits" "$KB_DIR/mount.log" | tail -1 | sed 's/^/# /' >&2
  kb_stop_server
done
