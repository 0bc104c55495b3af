#!/usr/bin/env bash
# The power-cut crash test (docs/mount.md, "Durability"): a filer and a volume server started
# with -testing.powerCut keep every write no sync covered in their memory (the volume store's
# PowerCutEnv, RocksDB's WAL buffer), so kill -9 loses exactly what a power cut would. Three
# writers run an fsync-heavy workload through a real mount (tests/mount/power_cut_workload.py:
# small records take the journaled fsync path, large ones the upload path) and log each record
# once its fsync returned (each writer its own files: see SHARED_FILES). At a random moment
# the volume server (round 1), the filer (round 2) or both (later rounds) are killed with
# kill -9, then the writers and the mount; everything restarts and a fresh mount must read back
# every logged record of every round byte for byte (no EIO). After each filer crash, filer.fsck -volumes finds no problem but leaked blobs
# (uploads whose commit died: expected), and clean after -fix; at the end it is clean as is.
#
#   power_cut_test.sh KELP_BINARY [ROUNDS]
# With ARTIFACT_DIR set, a failure leaves the logs in $ARTIFACT_DIR/power_cut.
# Exit: 0 all passed, 1 a check failed.
set -uo pipefail
KELP=${1:-}
[ -x "$KELP" ] || { echo "usage: $0 KELP_BINARY [ROUNDS]"; exit 2; }
KELP=$(realpath "$KELP")
ROUNDS=${2:-4}
MOUNT_FLAGS="-chunkSizeLimitMB=1 -writeBufferSizeMB=16 -cacheCapacityMB=0"
FILER_FLAGS="-testing.powerCut"
VOLUME_FLAGS="-testing.powerCut"
FAKE=""
# shellcheck source=tests/mount/lib.sh
source "$(dirname "$0")/lib.sh"
WORKLOAD="$LIB_DIR/power_cut_workload.py"
WRITERS=3
# Each writer has files of its own. SHARED_FILES=1 makes the writers share three files, which
# finds the mount's lost-error bug (an upload failure is reported to one fsync of the file
# only: another writer's fsync returns 0 although its bytes went down with that upload).
SHARED_FILES=${SHARED_FILES:-0}

# The filer lists the volume server as alive (it heartbeated since the filer started).
volume_alive() {
  curl -fsS "http://127.0.0.1:$FP/cluster/status" | python3 -c '
import json, sys
want = sys.argv[1]
sys.exit(0 if any(s["url"] == want and s["alive"] for s in json.load(sys.stdin)["servers"]) else 1)' "127.0.0.1:$VP"
}
# kill9 PID: kill -9 and wait until it is gone.
kill9() {
  kill -KILL "$1" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.05; done
  return 1
}
acked() {  # fsyncs acknowledged so far, all rounds
  local n=0 f
  for f in "$T"/acked.*; do [ -f "$f" ] && n=$((n + $(wc -l <"$f"))); done
  echo "$n"
}
# fsck_after_crash: on the store of the killed filer, with the volume server up: no problem
# but leaked blobs, and clean once -fix queued those for GC.
fsck_after_crash() {
  local out=$T/fsck.out rc=0 leaks
  "$KELP" filer.fsck -dir="$T/filer" -volumes="127.0.0.1:$VP" >"$out" 2>"$T/fsck.err" || rc=$?
  if grep '^problem:' "$out" | grep -v '^problem: leaked blob' >"$T/fsck.bad"; then
    log "filer.fsck after the crash found:"; sed 's/^/#   /' "$T/fsck.bad" | head -20
    return 1
  fi
  leaks=$(grep -c '^problem: leaked blob' "$out" || true)
  [ "$rc" = 0 ] && return 0
  if [ "$leaks" = 0 ]; then
    log "filer.fsck could not run (exit $rc):"; tail -5 "$out" "$T/fsck.err"
    return 1
  fi
  echo "round: $leaks leaked blobs after the crash (uploads whose commit died); -fix queues them for GC"
  "$KELP" filer.fsck -dir="$T/filer" -volumes="127.0.0.1:$VP" -fix >"$out" 2>"$T/fsck.err" ||
    { log "filer.fsck -fix left problems:"; grep -v '^fixed:' "$out" | head -20; return 1; }
}

start_servers
M=$T/mnt
do_mount "$M"
mkdir -p "$M/pc"

round_check() {  # run as test_round_N
  local round=$1 what=$2 w pids=() mount_pid
  local base=$((round * WRITERS))
  local before
  cd /
  before=$(acked)
  for w in $(seq 0 $((WRITERS - 1))); do
    python3 "$WORKLOAD" write "$M/pc" "$T/acked.$round.$w" $(((base + w) * (48 << 20))) "$((base + w))" \
      "$SHARED_FILES" 2>>"$T/writers.log" &
    pids+=($!)
  done
  # The kill point: once the round's writers have had 20 fsyncs acknowledged, a random
  # 0-2 s later.
  # shellcheck disable=SC2016  # within evaluates it anew each time
  within 30 'test "$(acked)" -ge $((before + 20))'
  sleep "$(python3 -c 'import random; print(round(random.uniform(0, 2), 2))')"
  echo "round $round: kill -9 of $what at $(date +%s.%N | cut -c1-14) after $(($(acked) - before)) acknowledged fsyncs"
  case $what in
    volume) kill9 "$(cat "$S/volume.pid")" ;;
    filer) kill9 "$(cat "$S/filer.pid")" ;;
    both) kill9 "$(cat "$S/filer.pid")"; kill9 "$(cat "$S/volume.pid")" ;;
  esac
  # Writers going on against the survivors may still get fsyncs acknowledged (journaled ones
  # need only the filer): those count too. Then the writers and the mount die.
  sleep 0.5
  for w in "${pids[@]}"; do kill9 "$w"; done
  wait "${pids[@]}" 2>/dev/null || true
  mount_pid=$(cat "$S/mount-$(basename "$M").pid")
  kill9 "$mount_pid"
  fusermount3 -uz "$M" 2>/dev/null || true
  echo "round $round: $(($(acked) - before)) acknowledged fsyncs, $(acked) in all rounds"

  [ "$what" = filer ] || start_volume
  if [ "$what" != volume ]; then
    fsck_after_crash
    start_filer
  fi
  within 20 volume_alive
  do_mount "$M"
  python3 "$WORKLOAD" verify "$M/pc" "$T"/acked.*
}

for round in $(seq 0 $((ROUNDS - 1))); do
  case $round in
    0) what=volume ;;
    1) what=filer ;;
    *) what=both ;;
  esac
  eval "test_round_$round() { round_check $round $what; }"
  check "round_$round"
  grep -h '^round' "$T/round_$round.out" | sed 's/^/# /'
done

test_fsck_clean() {
  cd /
  do_unmount "$M"
  local filer_pid
  filer_pid=$(cat "$S/filer.pid")
  kill -TERM "$filer_pid" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$filer_pid" 2>/dev/null || break; sleep 0.1; done
  "$KELP" filer.fsck -dir="$T/filer" -volumes="127.0.0.1:$VP"
}
check fsck_clean

echo "# passed $PASSED, failed $FAILED"
if [ "$FAILED" != 0 ] && [ -n "${ARTIFACT_DIR:-}" ]; then
  # The servers' and the mount's logs, and the acknowledged records, for the report.
  mkdir -p "$ARTIFACT_DIR/power_cut" && cp "$T"/*.log "$T"/*.out "$T"/acked.* "$ARTIFACT_DIR/power_cut/" 2>/dev/null
  echo "# logs in $ARTIFACT_DIR/power_cut"
fi
[ "$FAILED" = 0 ]
