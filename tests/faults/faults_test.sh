#!/usr/bin/env bash
# Faults under load (issue 12 part 3; docs/reliability.md, "Faults under load"). Real `kelp
# filer`, `kelp volume` and `kelp mount` processes on loopback:
#   - kill_under_load: sysbench fileio rndrw (checksum-validated blocks) and a file-tree
#     workload (tree_workload.py, a ledger of every write whose fsync returned) run while the
#     volume server, the filer and the mount are each killed with kill -9 and restarted; then
#     every acknowledged file reads back intact, sysbench's validation never failed and a clean
#     run passes, and filer.fsck finds the namespace clean and no blob missing;
#   - frozen_volume: a volume server under SIGSTOP: reads of files with chunks there fail with
#     EIO within -rpcTimeoutMs (plus slack), never hang; files on the other server read
#     intact; new fsynced files (journaled and uploaded) succeed in bounded time; all is well
#     after SIGCONT;
#   - volume_disk_full, filer_disk_full: the volume server's, then the filer's directory on a
#     small loop-mounted ext4: writes fail with ENOSPC (at write, close or fsync), nothing
#     acknowledged is lost, and writes succeed again once space is freed;
#   - corrupt_needle, corrupt_cache_entry: a byte flipped in a blob on disk and in a read-cache
#     entry while 8 readers read the file: each read returns the right bytes or EIO, never
#     wrong bytes (a replica or a refetch serves it where there is one).
# Usage: faults_test.sh KELP_BINARY [short|long]. short (CI) takes about 2 minutes; long is the
# run whose figures docs/reliability.md quotes. Exit: 0 passed, 1 failed, 77 skipped.
set -uo pipefail
KELP=${1:-}
MODE=${2:-short}
FAKE=
MOUNT_FLAGS="-chunkSizeLimitMB=1 -writeBufferSizeMB=32"
# shellcheck source=tests/mount/lib.sh
source "$(dirname "$0")/../mount/lib.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
WL() { python3 "$HERE/tree_workload.py" "$@"; }
PROBE() { python3 "$HERE/probe.py" "$@"; }
M=$T  # lib.sh's check() starts each test here

[ -x "$KELP" ] || { echo "usage: $0 KELP_BINARY [short|long]"; exit 2; }
KELP=$(realpath "$KELP")
if [ "$(id -u)" != 0 ] || [ ! -w /dev/fuse ]; then echo "# skip: needs root and /dev/fuse"; exit 77; fi
for tool in sysbench mkfs.ext4 losetup; do
  command -v "$tool" >/dev/null || { echo "# skip: $tool missing (scripts/install-deps.sh installs it)"; exit 77; }
done
case "$MODE" in
  short) LOAD=3 SB_SIZE=32M SB_FILES=8 SB_TIME=3 ROUNDS=1 ;;
  long) LOAD=40 SB_SIZE=256M SB_FILES=16 SB_TIME=20 ROUNDS=3 ;;
  *) echo "usage: $0 KELP_BINARY [short|long]"; exit 2 ;;
esac
RPC_TIMEOUT_MS=2000
ONLY=${FAULTS_ONLY:-}  # a space-separated list of cases to run (default: all)

# Loop-mounted file systems live outside $T: lib.sh's cleanup removes $T after stopping every
# process; they are unmounted after that.
LOOPS=$(mktemp -d /tmp/kelp-faults-loop.XXXXXX)
faults_cleanup() {
  # Processes first (a stopped one cannot exit), then lib.sh's teardown, then the loops.
  for f in "$S"/*.pid; do [ -e "$f" ] && kill -CONT "$(cat "$f")" 2>/dev/null; done
  cleanup
  for d in "$LOOPS"/*/; do
    [ -d "$d" ] && mountpoint -q "$d" && umount -l "$d"
  done
  rm -rf "$LOOPS"
}
trap faults_cleanup EXIT

# ---- processes by role; $S/pids always lists the live ones, for lib.sh's teardown ----
set_pid() {  # set_pid ROLE PID
  echo "$2" >"$S/$1.pid"
  cat "$S"/*.pid >"$S/pids"
}
pid_of() { cat "$S/$1.pid"; }
# Gone: no such process, or a zombie with no thread left (a leader is a zombie while its other
# threads still exit, holding the process's files: a RocksDB LOCK, a FUSE device).
gone() {
  ! kill -0 "$1" 2>/dev/null ||
    { [ "$(ps -o stat= -p "$1" 2>/dev/null | cut -c1)" = Z ] && [ "$(ls "/proc/$1/task" 2>/dev/null | wc -l)" -le 1 ]; }
}
kill9() {  # kill9 ROLE: kill -9 and wait until it is gone
  local p
  p=$(pid_of "$1")
  kill -9 "$p"
  within 10 "gone $p"
}
stop_role() {  # stop_role ROLE: SIGTERM and wait
  local p
  p=$(pid_of "$1")
  kill -TERM "$p" 2>/dev/null || true  # it may have died already (a case that failed)
  within 30 "gone $p"
}

# servers_alive N: the filer sees N live volume servers.
servers_alive() {
  curl -fsS "http://127.0.0.1:$FP/status" 2>/dev/null |
    python3 -c 'import json,sys; s=json.load(sys.stdin); print(sum(1 for v in s["topology"]["servers"] if v.get("alive")))' 2>/dev/null
}
start_filer() {  # start_filer DIR: the filer on $FP
  "$KELP" filer -dir="$1" -port="$FP" -pulseMs=300 >>"$T/filer.log" 2>&1 &
  set_pid filer $!
  wait_http "$FP" || { log "filer did not start"; tail "$T/filer.log"; return 1; }
}
start_vol() {  # start_vol ROLE DIR PORT [flags]
  local role=$1 dir=$2 port=$3
  shift 3
  mkdir -p "$dir"
  "$KELP" volume -dir="$dir" -port="$port" -filer="127.0.0.1:$FP" -max=4 "$@" >>"$T/$role.log" 2>&1 &
  set_pid "$role" $!
  wait_http "$port" || { log "$role did not start"; tail "$T/$role.log"; return 1; }
}
start_mount() {  # start_mount ROLE DIR [flags]
  local role=$1 dir=$2
  shift 2
  mkdir -p "$dir"
  # shellcheck disable=SC2086  # MOUNT_FLAGS is a list of flags
  "$KELP" mount -dir="$dir" -filer="127.0.0.1:$FP" -rpcTimeoutMs=$RPC_TIMEOUT_MS $MOUNT_FLAGS "$@" \
    >>"$T/$role.log" 2>&1 &
  set_pid "$role" $!
  grep -qx "$dir" "$S/mounts" || echo "$dir" >>"$S/mounts"
  wait_mount "$dir" || { log "$role did not come up"; tail "$T/$role.log"; return 1; }
}
stop_mount() {  # stop_mount ROLE DIR
  stop_role "$1"
  ! grep -q " $2 " /proc/self/mountinfo || fusermount3 -uz "$2"
}
# A fresh cluster: filer (data in $1) and volume servers vol1.. (dirs $2...), all alive.
cluster() {
  local fdir=$1 i=0 d
  shift
  FP=$(free_port)
  start_filer "$fdir" || return 1
  for d in "$@"; do
    i=$((i + 1))
    eval "VP$i=$(free_port)"
    start_vol "vol$i" "$d" "$(eval echo "\$VP$i")" || return 1
  done
  within 20 "[ \"\$(servers_alive)\" = $# ]"
}
teardown_cluster() {  # stops every role left (mounts first)
  local f role
  for f in "$S"/mnt*.pid; do
    [ -e "$f" ] || continue
    role=$(basename "$f" .pid)
    kill -CONT "$(cat "$f")" 2>/dev/null || true
    stop_role "$role"
    rm -f "$f"
  done
  while read -r m; do ! grep -q " $m " /proc/self/mountinfo || fusermount3 -uz "$m"; done <"$S/mounts"
  : >"$S/mounts"
  for f in "$S"/*.pid; do
    [ -e "$f" ] || continue
    kill -CONT "$(cat "$f")" 2>/dev/null || true
    stop_role "$(basename "$f" .pid)"
    rm -f "$f"
  done
  cat "$S"/*.pid >"$S/pids" 2>/dev/null || : >"$S/pids"
}
# A small ext4 on a loop device at $LOOPS/NAME (MiB), for full-disk cases.
loop_fs() {
  local name=$1 mib=$2
  truncate -s "${mib}M" "$LOOPS/$name.img"
  mkfs.ext4 -q -F -m 0 "$LOOPS/$name.img"
  mkdir -p "$LOOPS/$name"
  mount -o loop "$LOOPS/$name.img" "$LOOPS/$name"
}
# A loop mount works here (not in every container): a tiny one, made and undone.
loop_works() {
  [ -n "${LOOP_OK:-}" ] && return "$LOOP_OK"
  LOOP_OK=1
  if loop_fs probe 8 2>/dev/null; then
    umount "$LOOPS/probe" && LOOP_OK=0
  fi
  rm -f "$LOOPS/probe.img"
  return "$LOOP_OK"
}
# Leaves about KiB free on the file system of DIR with a ballast file.
ballast() {
  local dir=$1 keep_kb=$2 avail
  avail=$(df -k --output=avail "$dir" | tail -1)
  [ "$avail" -gt "$keep_kb" ] || return 0
  fallocate -l "$(((avail - keep_kb) * 1024))" "$dir/ballast"
}
run_case() {  # run_case NAME: lib.sh's check, when FAULTS_ONLY names it or is empty
  [ -z "$ONLY" ] || [[ " $ONLY " == *" $1 "* ]] || return 0
  check "$1"
}
# FIGURES: one line per measured fact, for docs/reliability.md.
figure() { echo "$*" >>"$T/figures"; echo "# figure: $*"; }

# ---- 1. kill -9 of each process under load ----
test_kill_under_load() {
  local stop=$T/stop-load M=$T/m1 round target sb_pid wl_pid runs failed_runs validation
  # However this ends, the load stops (both loops watch the stop file).
  trap "touch '$stop'" EXIT  # (expanded now: the local is gone when the trap runs)
  cluster "$T/f1" "$T/v1" || return 1
  start_mount mnt1 "$M" -cacheCapacityMB=64 -cacheDir="$T/cache1"
  mkdir -p "$M/sb"
  (cd "$M/sb" && sysbench fileio --file-total-size="$SB_SIZE" --file-num="$SB_FILES" --validate=on prepare) \
    >"$T/sb-prepare.log" 2>&1 || { tail "$T/sb-prepare.log"; return 1; }
  # sysbench stops at its first I/O error (while a process is down): it is started again
  # until the stop file appears. Each run's log is kept.
  (
    i=0 rc=0
    while [ ! -e "$stop" ]; do
      i=$((i + 1))
      rc=0  # (set -e holds in here too: a failed run must not end the loop)
      (cd "$M/sb" && sysbench fileio --file-total-size="$SB_SIZE" --file-num="$SB_FILES" --file-test-mode=rndrw \
        --validate=on --file-fsync-freq=20 --threads=4 --time="$SB_TIME" run) >"$T/sb-run.$i.log" 2>&1 || rc=$?
      echo "$rc $i" >>"$T/sb-runs"
      [ -e "$stop" ] || sleep 0.2
    done
  ) &
  sb_pid=$!
  WL run "$M/tree" "$T/ledger1" --seconds 100000 --seed 1 --stop "$stop" >"$T/wl1.out" 2>&1 &
  wl_pid=$!
  for round in $(seq "$ROUNDS"); do
    for target in vol1 filer mnt1; do
      sleep "$LOAD"  # load runs this long between faults
      log "round $round: kill -9 $target"
      kill9 "$target"
      case $target in
        vol1) start_vol vol1 "$T/v1" "$VP1" ;;
        filer) start_filer "$T/f1" ;;
        mnt1)
          fusermount3 -uz "$M"
          start_mount mnt1 "$M" -cacheCapacityMB=64 -cacheDir="$T/cache1"
          ;;
      esac
      within 20 '[ "$(servers_alive)" = 1 ]'
    done
  done
  sleep "$LOAD"
  touch "$stop"
  wait "$wl_pid"
  echo "tree workload: $(cat "$T/wl1.out")"
  grep -q '"bad": \[\]' "$T/wl1.out"
  wait "$sb_pid"
  runs=$(wc -l <"$T/sb-runs")
  failed_runs=$(awk '$1 != 0' "$T/sb-runs" | wc -l)
  validation=$(cat "$T"/sb-run.*.log | grep -c "Validation failed" || true)
  echo "sysbench: $runs runs, $failed_runs ended by an I/O error of a fault, $validation validation failures"
  grep -h "FATAL" "$T"/sb-run.*.log | sort | uniq -c | head -5
  test "$validation" = 0
  # Every acknowledged file, and a clean sysbench run, on the restarted cluster.
  WL verify "$M/tree" "$T/ledger1" | tee "$T/verify1.out"
  (cd "$M/sb" && sysbench fileio --file-total-size="$SB_SIZE" --file-num="$SB_FILES" --file-test-mode=rndrw \
    --validate=on --threads=4 --time="$SB_TIME" run) >"$T/sb-final.log" 2>&1 || { tail "$T/sb-final.log"; return 1; }
  figure "kill_under_load rounds=$ROUNDS kills=$((ROUNDS * 3)) sysbench_runs=$runs sysbench_failed_runs=$failed_runs" \
    "validation_failures=$validation tree=$(cat "$T/wl1.out") verify=$(cat "$T/verify1.out")"
  # filer.fsck on the stopped filer: the namespace clean, no blob missing (leaks are expected
  # after kills: blobs uploaded but never committed).
  stop_mount mnt1 "$M"
  stop_role filer
  "$KELP" filer.fsck -dir="$T/f1" >"$T/fsck1.log" 2>&1 || { cat "$T/fsck1.log"; return 1; }
  # With the blobs: exit 1 when it finds leaks, which must be its only problems.
  "$KELP" filer.fsck -dir="$T/f1" -volumes="127.0.0.1:$VP1" >"$T/fsck1v.log" 2>&1 || true
  tail -1 "$T/fsck1v.log"
  grep -q "filer.fsck: .* 0 missing, 0 unverified" "$T/fsck1v.log"
  ! grep "^problem" "$T/fsck1v.log" | grep -v "^problem: leaked blob" | grep -q .
  figure "kill_under_load fsck: $(tail -1 "$T/fsck1v.log" | sed 's/.*; blobs: /blobs: /')"
  teardown_cluster
}
run_case kill_under_load

# ---- 2. a volume server frozen with SIGSTOP ----
# Read bound: one -rpcTimeoutMs per socket wait; a read may wait twice (its chunk and a
# read-ahead of the next), plus the machine's slack.
FROZEN_MAX_S=$((RPC_TIMEOUT_MS * 3 / 1000 + 3))
test_frozen_volume() {
  local M=$T/m2 i src where on1=() on2=() specs=() out
  teardown_cluster
  # Files on each server for sure: f1-f8 while vol1 is the only one, f9-f16 while vol2 is.
  cluster "$T/f2" "$T/v2a" || return 1
  start_mount mnt2 "$M" -cacheCapacityMB=0
  mkdir -p "$M/frozen" "$T/src2"
  for i in $(seq 16); do head -c 300000 /dev/urandom >"$T/src2/f$i"; done
  for i in $(seq 8); do cp "$T/src2/f$i" "$M/frozen/f$i"; done
  stop_role vol1
  within 20 '[ "$(servers_alive)" = 0 ]'
  VP2=$(free_port)
  start_vol vol2 "$T/v2b" "$VP2" -max=4
  within 20 '[ "$(servers_alive)" = 1 ]'
  for i in $(seq 9 16); do cp "$T/src2/f$i" "$M/frozen/f$i"; done
  start_vol vol1 "$T/v2a" "$VP1"
  within 20 '[ "$(servers_alive)" = 2 ]'
  for i in $(seq 16); do
    src=$T/src2/f$i
    where=$(PROBE locate "$src" "$T/v2a" "$T/v2b" | awk '{print $1}')
    case "$where" in
      "$T/v2a"/*) on1+=("$M/frozen/f$i:$src:err") ;;
      "$T/v2b"/*) on2+=("$M/frozen/f$i:$src:ok") ;;
      *) echo "f$i found at '$where'"; return 1 ;;
    esac
  done
  echo "files with chunks on vol1: ${#on1[@]}, on vol2: ${#on2[@]}"
  [ "${#on1[@]}" -gt 0 ] && [ "${#on2[@]}" -gt 0 ]
  echo 3 >/proc/sys/vm/drop_caches
  kill -STOP "$(pid_of vol1)"
  # Reads from 4 threads at once: each file on vol1 fails (EIO) in bounded time, each on vol2
  # reads intact, none hangs.
  out=$(PROBE read --threads 4 --max-seconds "$FROZEN_MAX_S" "${on1[@]}" "${on2[@]}")
  echo "reads while vol1 is stopped: $out"
  case "$out" in *'"EIO"'*) ;; *) echo "no EIO"; return 1 ;; esac
  # New files meanwhile, fsynced: small ones journaled in the filer, large ones uploaded to
  # the live server (an upload the coordinator still sent to the stopped one is retried
  # elsewhere), all in bounded time. The 16 files copied before were synced on their servers
  # by the mount's writeback since, so no fsync waits on the stopped server.
  local wout bout
  wout=$(PROBE write --max-seconds "$FROZEN_MAX_S" "$M/during" 8 256)
  echo "writes of 256 KiB while vol1 is stopped: $wout"
  bout=$(PROBE write --max-seconds "$FROZEN_MAX_S" "$M/during_big" 8 3072)
  echo "writes of 3 MiB while vol1 is stopped: $bout"
  case "$wout$bout" in *'"ok": 8,'*'"ok": 8,'*) ;; *) echo "new files failed while a server was stopped"; return 1 ;; esac
  figure "frozen_volume rpcTimeoutMs=$RPC_TIMEOUT_MS files_on_stopped=${#on1[@]} files_elsewhere=${#on2[@]} reads=$out writes_256k=$wout writes_3m=$bout"
  kill -CONT "$(pid_of vol1)"
  within 20 '[ "$(servers_alive)" = 2 ]'
  for i in "${!on1[@]}"; do on1[$i]=${on1[$i]%:err}:ok; done
  PROBE read --threads 4 --max-seconds 30 "${on1[@]}" "${on2[@]}"
  # What was acknowledged while it was stopped reads back.
  (cd / && sha256sum -c --quiet "$M/during.ok" "$M/during_big.ok")
  teardown_cluster
}
run_case frozen_volume

# ---- 3. full disks ----
# fill_until_enospc DIR LEDGER KB: writes files of KB KiB until the first error, which must
# be ENOSPC; prints how many were acknowledged.
fill_until_enospc() {
  local out
  out=$(WL fill "$1" "$2" --kb "$3" --seed 2)
  echo "$out"
  case "$out" in *'"first_error": "ENOSPC"'*) ;; *) echo "expected ENOSPC"; return 1 ;; esac
}
# resumes DIR LEDGER KB: after space was freed, a write is acknowledged again within 30 s.
resumes() {
  local i
  for i in $(seq 60); do
    case "$(WL fill "$1" "$2" --kb "$3" --count 1 --seed $((100 + i)))" in *'"written": 1'*) return 0 ;; esac
    sleep 0.5
  done
  echo "no write succeeded within 30 s of freeing space"
  return 1
}
# full_disk LOOP M LEDGER KB BEFORE KEEP_KB: with the cluster and mount M up and a role's
# directory on the loop fs LOOP: BEFORE files of KB KiB, a ballast leaving KEEP_KB free, files
# until ENOSPC; all acknowledged read back; the ballast goes and writes are acknowledged again.
full_disk() {
  local loop=$1 M=$2 ledger=$3 kb=$4 out
  # One directory, one ledger (names are relative to it); each phase its own seed (names).
  WL fill "$M" "$ledger" --kb "$kb" --count "$5" --seed 1 >/dev/null
  ballast "$LOOPS/$loop" "$6"
  out=$(fill_until_enospc "$M" "$ledger" "$kb") || { echo "$out"; tail -5 "$T/filer.log"; return 1; }
  echo "$loop full: $out"
  WL verify "$M" "$ledger"
  rm -f "$LOOPS/$loop/ballast"
  resumes "$M" "$ledger" "$kb"
  WL verify "$M" "$ledger" >"$T/verify-$loop.out"
  figure "$loop $out verify=$(cat "$T/verify-$loop.out")"
}
test_volume_disk_full() {
  teardown_cluster
  loop_fs vfull 96
  cluster "$T/f3" "$LOOPS/vfull/v" || return 1
  start_mount mnt3 "$T/m3" -cacheCapacityMB=0
  full_disk vfull "$T/m3" "$T/ledger3" 512 4 6144
  teardown_cluster
}
if loop_works; then run_case volume_disk_full; else log "skip volume_disk_full: no loop device here"; fi

test_filer_disk_full() {
  local M=$T/m4
  teardown_cluster
  # RocksDB preallocates its WAL (1.1 x the 64 MiB memtable): 160 MiB leaves room beyond it.
  loop_fs ffull 160
  cluster "$LOOPS/ffull/f" "$T/v4" || return 1
  start_mount mnt4 "$M" -cacheCapacityMB=0
  # Files of 64 KiB, each fsynced: the fsync journals their bytes in the filer's store, so its
  # disk fills. The ballast leaves 4 MiB above the filer's 16 MiB reserve.
  full_disk ffull "$M" "$T/ledger4" 64 20 $(((16 + 4) * 1024))
  # What was acknowledged survives a restart of the filer too.
  stop_mount mnt4 "$M"
  stop_role filer
  "$KELP" filer.fsck -dir="$LOOPS/ffull/f" >"$T/fsck4.log" 2>&1 || { cat "$T/fsck4.log"; return 1; }
  start_filer "$LOOPS/ffull/f"
  start_mount mnt4 "$M" -cacheCapacityMB=0
  WL verify "$M" "$T/ledger4"
  teardown_cluster
}
if loop_works; then run_case filer_disk_full; else log "skip filer_disk_full: no loop device here"; fi

# ---- 4. corrupt data under concurrent readers ----
test_corrupt_needle() {
  local M=$T/m5 R=$T/m5r loc n out rout
  teardown_cluster
  cluster "$T/f5" "$T/v5a" "$T/v5b" || return 1
  start_mount mnt5 "$M" -cacheCapacityMB=0
  start_mount mnt5r "$R" -cacheCapacityMB=0 -replication=001
  head -c $((1536 << 10)) /dev/urandom >"$T/single"
  head -c $((1536 << 10)) /dev/urandom >"$T/replicated"
  # The replicated file first: its three volumes take a slot on both servers (-max=4 each).
  # Written second, it failed with ENOSPC in about 1 run of 35: the single copy's four volumes,
  # placed at random weighted by free slots, had filled one server.
  cp "$T/replicated" "$R/replicated"
  cp "$T/single" "$M/single"
  # One copy of each damaged on disk, under the running volume servers.
  loc=$(PROBE locate "$T/single" "$T/v5a" "$T/v5b")
  n=$(echo "$loc" | grep -c .)
  [ "$n" = 1 ] || { echo "single: $n copies: $loc"; return 1; }
  PROBE corrupt $loc
  loc=$(PROBE locate "$T/replicated" "$T/v5a" "$T/v5b")
  n=$(echo "$loc" | grep -c .)
  [ "$n" = 2 ] || { echo "replicated: $n copies: $loc"; return 1; }
  PROBE corrupt $(echo "$loc" | head -1)
  echo 3 >/proc/sys/vm/drop_caches
  # 8 readers at once, 3 passes each: never wrong bytes. No copy is intact: EIO; a replica is.
  out=$(PROBE read --threads 8 --passes 3 --max-seconds 30 "$M/single:$T/single:err")
  echo "corrupt needle, no replica: $out"
  rout=$(PROBE read --threads 8 --passes 3 --max-seconds 30 "$R/replicated:$T/replicated:any")
  echo "corrupt needle, one intact replica: $rout"
  # The filer's HTTP API never answers 200 with the damaged bytes either.
  # (A 200 whose body is cut short, the damage found mid-stream, is an error to the client.)
  local code got
  : >"$T/http-single"
  code=$(curl -s -o "$T/http-single" -w '%{http_code}' "http://127.0.0.1:$FP/single" || true)
  got=$(stat -c %s "$T/http-single")
  echo "HTTP GET of the damaged file: $code, $got bytes"
  ! cmp -s "$T/http-single" "$T/single" || { echo "served intact?"; return 1; }
  [ "$code" != 200 ] || [ "$got" -lt "$(stat -c %s "$T/single")" ]
  figure "corrupt_needle no_replica=$out one_intact_replica=$rout http=$code,${got}_bytes"
  teardown_cluster
}
run_case corrupt_needle

test_corrupt_cache_entry() {
  local M=$T/m6 loc out entries=0
  teardown_cluster
  cluster "$T/f6" "$T/v6" || return 1
  start_mount mnt6 "$M" -cacheCapacityMB=64 -cacheDir="$T/cache6"
  head -c $((3 << 20)) /dev/urandom >"$T/cached"
  cp "$T/cached" "$M/cached"
  echo 3 >/proc/sys/vm/drop_caches
  cmp "$T/cached" "$M/cached"  # the read fills the cache
  loc=$(PROBE locate "$T/cached" "$T/cache6")
  [ -n "$loc" ] || { echo "not in the cache: $(find "$T/cache6" -type f | head)"; return 1; }
  while read -r f off; do
    PROBE corrupt "$f" "$off"
    entries=$((entries + 1))
  done <<<"$loc"
  echo 3 >/proc/sys/vm/drop_caches
  out=$(PROBE read --threads 8 --passes 3 --max-seconds 30 "$M/cached:$T/cached:ok")
  echo "corrupt cache entry ($entries copies damaged): $out"
  figure "corrupt_cache_entry damaged=$entries reads=$out"
  teardown_cluster
}
run_case corrupt_cache_entry

echo "# figures:"
cat "$T/figures" 2>/dev/null
echo "# passed $PASSED, failed $FAILED"
[ "$FAILED" = 0 ]
