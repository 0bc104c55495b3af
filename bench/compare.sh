#!/usr/bin/env bash
# bench/compare.sh: Kelp beside the filesystems people know, on this machine, in one run.
#
# Brings up each target in turn from Debian's packages (the local disk, bindfs, MooseFS,
# GlusterFS, CephFS through ceph-fuse) and Kelp (`kelp server` + `kelp mount
# -chunkSizeLimitMB=4 -cacheCapacityMB=1000`), measures whether its fsync reaches the disk
# (flush syscalls of its data servers per application fsync), runs the workloads of
# bench/compare/workloads.sh on it (sysbench, fio, shell and metadata ops, write+fsync pairs,
# nginx + ab), tears it down (unmount, then stop exactly the PIDs it started), and writes a
# report with one table per workload, Kelp's ratio to each peer, and PNG bar charts.
#
#   bench/compare.sh            the full run (about 25 minutes; hold the machine for it):
#                               updates the generated section of bench/RESULTS.md and
#                               bench/charts/compare-*.png
#   bench/compare.sh -quick     small sizes, the local disk and Kelp only, about a minute
#                               (CI runs it); the report goes to the output folder only
#
# Flags: -quick, -targets="local bindfs moosefs glusterfs cephfs kelp" (any subset, in that
# order; bindfs-tuned is also known), -out=DIR (raw results, logs, report; default
# /var/tmp/kelp-compare-results), -update=auto|yes|no (write bench/RESULTS.md and
# bench/charts; auto = yes for a full run). The environment tunables of
# bench/compare/workloads.sh pass through (e.g. WORKLOADS="a e"). SETTLE_MAX=seconds: before
# each target is measured, wait at most this long for a quiet machine (settle below; default
# 90, 0 with -quick).
# Needs root (drop_caches, mounts, network namespace, strace of the servers). KELP=path of the
# kelp binary (default build/cmd/kelp).
set -u
export LC_ALL=C
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/compare/common.sh
source "$HERE/compare/common.sh"
# shellcheck source=bench/compare/peers.sh
source "$HERE/compare/peers.sh"

QUICK=0
TARGETS=""
OUT=/var/tmp/kelp-compare-results
UPDATE=auto
for a in "$@"; do
  case "$a" in
    -quick | --quick) QUICK=1 ;;
    -targets=* | --targets=*) TARGETS=${a#*=} ;;
    -out=* | --out=*) OUT=${a#*=} ;;
    -update=* | --update=*) UPDATE=${a#*=} ;;
    -h | -help | --help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "compare.sh: unknown argument $a (see -h)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || die "run as root (drop_caches, mounts, strace of the servers)"

if [ "$QUICK" = 1 ]; then
  : "${TARGETS:=local kelp}"
  export SB_SIZE=${SB_SIZE:-16M} SB_TIME=${SB_TIME:-2} FIO_SIZE=${FIO_SIZE:-32M} FIO_TIME=${FIO_TIME:-2}
  export NFILES=${NFILES:-300} NDIRS=${NDIRS:-10} META_N=${META_N:-300} DD_MB=${DD_MB:-32}
  export SYNC_TIME=${SYNC_TIME:-2} AB_TIME=${AB_TIME:-1} STEP_TIMEOUT=${STEP_TIMEOUT:-120}
  PROBE_SECS=${PROBE_SECS:-1}
  SETTLE_MAX=${SETTLE_MAX:-0}
  [ "$UPDATE" = auto ] && UPDATE=no
else
  : "${TARGETS:=local bindfs moosefs glusterfs cephfs kelp}"
  PROBE_SECS=${PROBE_SECS:-5}
  SETTLE_MAX=${SETTLE_MAX:-90}
  [ "$UPDATE" = auto ] && UPDATE=yes
fi
read -r -a TARGET_LIST <<<"$TARGETS"
for t in "${TARGET_LIST[@]}"; do
  declare -F "setup_$t" >/dev/null || die "unknown target $t (local bindfs bindfs-tuned moosefs glusterfs cephfs kelp)"
done

for pair in sysbench:sysbench fio:fio gcc:gcc nginx:nginx-light ab:apache2-utils gnuplot:gnuplot-nox strace:strace curl:curl; do
  need_pkg "${pair%%:*}" "${pair#*:}" || die "${pair#*:} is needed"
done

RES=$OUT/results
rm -rf "$OUT"
mkdir -p "$RES" "$CMP_TMP" "$MNT_ROOT"
META=$OUT/meta.txt   # key<TAB>value lines for the report
meta() { printf '%s\t%s\n' "$1" "$2" >>"$META"; }
meta mode "$([ "$QUICK" = 1 ] && echo quick || echo full)"
meta date "$(date -u '+%Y-%m-%d %H:%M UTC')"
meta machine "$(nproc) vCPU ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'))"
meta memory "$(free -g | awk '/Mem:/ {print $2}') GiB"
meta os "$(. /etc/os-release; echo "$PRETTY_NAME"), kernel $(uname -r)"
meta disk "$(findmnt -no FSTYPE,SOURCE -T "$CMP_TMP" | tr -s ' ')"
meta tools "sysbench $(sysbench --version | awk '{print $2}'), $(fio --version), nginx $(nginx -v 2>&1 | sed 's/.*nginx\///'), ab $(ab -V | awk 'NR==1 {print $5}')"
meta kelp_flags "$KELP_MOUNT_FLAGS"
meta params "SB_SIZE=${SB_SIZE:-1G} SB_TIME=${SB_TIME:-30} FIO_SIZE=${FIO_SIZE:-1G} FIO_TIME=${FIO_TIME:-20} NFILES=${NFILES:-10000} META_N=${META_N:-10000} DD_MB=${DD_MB:-1024} SYNC_TIME=${SYNC_TIME:-10} AB_TIME=${AB_TIME:-10} AB_C=${AB_C:-16}"
meta targets "${TARGET_LIST[*]}"
meta load_before "$(cut -d' ' -f1-3 /proc/loadavg)"

CURRENT=""
cleanup() {
  [ -n "$CURRENT" ] && { say "tearing down $CURRENT"; "teardown_$CURRENT"; }
  CURRENT=""
}
trap 'cleanup; exit 130' INT TERM
trap cleanup EXIT

# probe_fsync LABEL: fio 4 KiB writes with an fsync after each for PROBE_SECS on PEER_MNT,
# while strace counts the flush syscalls (fsync, fdatasync, syncfs, msync, sync) of
# PEER_DATA_PIDS. A data server that makes about one flush per application fsync (or more)
# writes through to the disk; one that makes none acknowledges from memory. sync_file_range
# is traced but not counted: it starts writes and waits for them, and flushes nothing (a
# server of only those would lose the device's cache at a power cut; Kelp's filer starts the
# WAL pages of a synced write with it before the fdatasync).
probe_fsync() {
  local label=$1 raw=$RES/$1/probe pargs=() p spid i app srv
  mkdir -p "$raw" "$PEER_MNT/.probe"
  if [ -n "$PEER_DATA_PIDS" ]; then
    for p in $PEER_DATA_PIDS; do pargs+=(-p "$p"); done
    strace -f -c -e trace=fsync,fdatasync,sync_file_range,syncfs,msync,sync -o "$raw/strace.txt" "${pargs[@]}" 2>"$raw/strace.err" &
    spid=$!
    # attached once strace has said so for every PID
    for ((i = 0; i < 100; i++)); do
      [ "$(grep -c 'attached' "$raw/strace.err" 2>/dev/null)" -ge "$(echo "$PEER_DATA_PIDS" | wc -w)" ] && break
      sleep 0.1
    done
  fi
  local w0=0 v0=0
  if [ "$label" = kelp ]; then
    w0=$(kelp_metric kelp_filer_wal_syncs_total)
    v0=$(kelp_metric kelp_volume_fdatasyncs_total)
  fi
  fio --name=probe --directory="$PEER_MNT/.probe" --filename=p.dat --size=64M --ioengine=psync --direct=0 \
    --fallocate=none --rw=write --bs=4k --fsync=1 --time_based --runtime="$PROBE_SECS" \
    --output-format=json --output="$raw/fio.json" >/dev/null 2>&1
  app=$(python3 -c 'import json,sys; t=open(sys.argv[1]).read(); print(json.loads(t[t.index("{"):])["jobs"][0]["sync"]["total_ios"])' "$raw/fio.json" 2>/dev/null || echo NA)
  echo "$label probe.app_fsyncs $app count" >>"$RES/$label.txt"
  if [ -n "$PEER_DATA_PIDS" ]; then
    kill -INT "$spid" 2>/dev/null
    wait "$spid" 2>/dev/null
    srv=$(awk '$NF ~ /^(fsync|fdatasync|syncfs|msync|sync)$/ {n += $4} END {print n + 0}' "$raw/strace.txt")
    echo "$label probe.server_flushes $srv count" >>"$RES/$label.txt"
  fi
  if [ "$label" = kelp ]; then
    echo "kelp probe.kelp_wal_syncs $(($(kelp_metric kelp_filer_wal_syncs_total) - w0)) count" >>"$RES/$label.txt"
    echo "kelp probe.kelp_volume_fdatasyncs $(($(kelp_metric kelp_volume_fdatasyncs_total) - v0)) count" >>"$RES/$label.txt"
  fi
  rm -rf "$PEER_MNT/.probe"
}
# settle: before a target is measured, waits (at most SETTLE_MAX seconds; 0 = not at all) for
# the machine to be quiet: what the previous target left written out (sync), then two seconds
# in a row with the CPUs less than 10 % and every disk less than 5 % busy. Each target then
# starts from a quiet machine, whatever the one before it left behind (writeback, deletions,
# daemons winding down). The 1-minute load average is no guide: it lags, and read 8.8 at
# Kelp's start on 2026-12-05 with the machine quiet after 2 s. Prints the seconds waited, and
# "(not quiet)" when it gave up.
settle() {
  [ "$SETTLE_MAX" -gt 0 ] || { echo 0; return 0; }
  sync
  python3 - "$SETTLE_MAX" <<'PY'
import re, sys, time
def sample():
    cpu = [int(x) for x in open('/proc/stat').readline().split()[1:8]]
    busy = sum(cpu) - cpu[3] - cpu[4]  # all but idle and iowait
    io = {}
    for line in open('/proc/diskstats'):
        f = line.split()
        if re.fullmatch(r'(sd[a-z]+|vd[a-z]+|xvd[a-z]+|nvme\d+n\d+)', f[2]):
            io[f[2]] = int(f[12])  # ms spent doing I/O
    return busy, sum(cpu), io, time.monotonic()
start = time.monotonic()
deadline = start + int(sys.argv[1])
quiet = 0
prev = sample()
while time.monotonic() < deadline:
    time.sleep(1)
    cur = sample()
    dt_ms = (cur[3] - prev[3]) * 1000
    cpu_busy = (cur[0] - prev[0]) / max(1, cur[1] - prev[1])
    disk_busy = max([(cur[2][d] - prev[2].get(d, cur[2][d])) / dt_ms for d in cur[2]] or [0])
    prev = cur
    quiet = quiet + 1 if cpu_busy < 0.10 and disk_busy < 0.05 else 0
    if quiet >= 2:
        print(round(time.monotonic() - start))
        sys.exit(0)
print(f"{round(time.monotonic() - start)} (not quiet)")
PY
}
kelp_metric() {
  curl -fsS "http://$KELP_FILER/metrics" | awk -v n="$1" '$1 == n || index($1, n "{") == 1 { s += $NF } END { printf "%.0f\n", s }'
}

START=$(date +%s)
FAILED_TARGETS=""
N=${#TARGET_LIST[@]}
i=0
for t in "${TARGET_LIST[@]}"; do
  i=$((i + 1))
  tag="[$i/$N $t] "
  say "${tag}setting up (elapsed $(( $(date +%s) - START )) s)"
  peer_reset
  CURRENT=$t
  if ! "setup_$t" >"$OUT/setup-$t.log" 2>&1 || [ -z "$PEER_MNT" ]; then
    say "${tag}setup FAILED (see $OUT/setup-$t.log), skipping"
    FAILED_TARGETS="$FAILED_TARGETS $t"
    tail -5 "$OUT/setup-$t.log" >&2
    cleanup
    meta "version_$t" "setup failed"
    continue
  fi
  meta "version_$t" "$PEER_VERSION"
  : >"$RES/$t.txt"
  mkdir -p "$RES/$t"
  say "${tag}up: $PEER_VERSION on $PEER_MNT; settled after $(settle) s (load $(cut -d' ' -f1 /proc/loadavg)); fsync probe (${PROBE_SECS} s)"
  probe_fsync "$t"
  say "${tag}workloads (load $(cut -d' ' -f1 /proc/loadavg))"
  # workloads.sh truncates LABEL.txt: it writes to a scratch label, appended after.
  FS_PIDS="$PEER_PIDS" RESULTS_DIR=$RES/w PROGRESS_PREFIX="$tag" "$HERE/compare/workloads.sh" "$PEER_MNT" "$t"
  cat "$RES/w/$t.txt" >>"$RES/$t.txt"
  mkdir -p "$RES/$t/workloads" && cp -r "$RES/w/$t/." "$RES/$t/workloads/" 2>/dev/null
  say "${tag}tearing down"
  cleanup
done
rm -rf "$RES/w"
rmdir "$MNT_ROOT"/* "$MNT_ROOT" "$CMP_TMP" 2>/dev/null
meta load_after "$(cut -d' ' -f1-3 /proc/loadavg)"
meta wall "$(( $(date +%s) - START )) s"

CHARTS=$OUT/charts
args=(--results "$RES" --meta "$META" --charts "$CHARTS" --report "$OUT/report.md")
if [ "$UPDATE" = yes ]; then
  args+=(--results-md "$CMP_ROOT/bench/RESULTS.md" --charts-dir "$CMP_ROOT/bench/charts")
fi
python3 "$HERE/compare/report.py" "${args[@]}" || die "report failed"
say "done in $(( $(date +%s) - START )) s: $OUT/report.md$([ "$UPDATE" = yes ] && echo ", bench/RESULTS.md and bench/charts/ updated")"
# Exit 1 when a target could not be set up or a step failed (NA in the tables).
NA=$(grep -h ' NA ' "$RES"/*.txt 2>/dev/null | awk '{print $1 ":" $2}' | tr '\n' ' ')
[ -n "$FAILED_TARGETS" ] && say "targets that did not come up:$FAILED_TARGETS"
[ -n "$NA" ] && say "steps that failed (NA): $NA"
[ -z "$FAILED_TARGETS" ] && [ -z "$NA" ]
