# Shared by the real-mount test scripts (mount_test.sh, mount_cache_test.sh): temp dir, state
# files, starting `kelp filer` + `kelp volume` on free loopback ports, mounting, unmounting,
# running checks, and a teardown (unmount first, then stop every process started) that runs
# on any exit. Source it after setting KELP (the binary) and optionally FAKE and MOUNT_FLAGS
# (flags every do_mount passes before its own; later flags win).
MOUNT_FLAGS=${MOUNT_FLAGS:-"-chunkSizeLimitMB=1 -writeBufferSizeMB=16 -cacheCapacityMB=0"}
T=$(mktemp -d /tmp/kelp-mount-test.XXXXXX)
# Checks run in subshells, so what must survive them (pids to stop, mounts to undo, the
# current pid of a mount) lives in files under $T/state.
S=$T/state
mkdir -p "$S"
: >"$S/pids"
: >"$S/mounts"
FAILED=0
PASSED=0

log() { echo "# $*"; }
cleanup() {
  while read -r m; do grep -q " $m " /proc/self/mountinfo && fusermount3 -uz "$m" 2>/dev/null; done <"$S/mounts"
  while read -r p; do kill -TERM "$p" 2>/dev/null; done <"$S/pids"
  while read -r p; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null
  done <"$S/pids"
  while read -r m; do grep -q " $m " /proc/self/mountinfo && fusermount3 -uz "$m" 2>/dev/null; done <"$S/mounts"
  # KELP_TEST_KEEP_LOGS=DIR keeps the processes' logs of a run there (for a failure's diagnosis).
  if [ -n "${KELP_TEST_KEEP_LOGS:-}" ]; then
    mkdir -p "$KELP_TEST_KEEP_LOGS" && find "$T" -maxdepth 1 -name '*.log' -exec cp {} "$KELP_TEST_KEEP_LOGS" \;
  fi
  rm -rf "$T"
}
trap cleanup EXIT
track_pid() { echo "$1" >>"$S/pids"; }

LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
free_port() { python3 "$LIB_DIR/free_port.py"; }  # p with p and p+10000 free

wait_http() { for _ in $(seq 100); do curl -fsS "http://127.0.0.1:$1/status" >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }
# wait_live_volume FILER_PORT VOLUME_PORT: until the filer's topology has the volume server alive
# (its first heartbeat arrived). /status is pretty-printed JSON with keys sorted: "alive" comes
# before "url" in a server's object.
wait_live_volume() {
  for _ in $(seq 200); do
    curl -fsS "http://127.0.0.1:$1/status" 2>/dev/null | tr -d ' \n' |
      grep -qE "\"alive\":true,[^}]*\"url\":\"[^\"]*:$2\"" && return 0
    sleep 0.05
  done
  return 1
}
wait_mount() { for _ in $(seq 100); do grep -q " $1 " /proc/self/mountinfo && return 0; sleep 0.1; done; return 1; }

# FILER_FLAGS and VOLUME_FLAGS, if set, are added to every start of those servers.
start_servers() {
  FP=$(free_port)
  VP=$(free_port)
  start_filer
  start_volume
}
start_filer() {
  # shellcheck disable=SC2086  # FILER_FLAGS is a list of flags
  "$KELP" filer -dir="$T/filer" -port="$FP" ${FILER_FLAGS:-} >>"$T/filer.log" 2>&1 &
  FILER_PID=$!; track_pid "$FILER_PID"; echo "$FILER_PID" >"$S/filer.pid"
  wait_http "$FP" || { log "filer did not start"; tail "$T/filer.log"; exit 1; }
}
start_volume() {
  # shellcheck disable=SC2086  # VOLUME_FLAGS is a list of flags
  "$KELP" volume -dir="$T/vol" -port="$VP" -filer="127.0.0.1:$FP" ${VOLUME_FLAGS:-} >>"$T/volume.log" 2>&1 &
  echo $! >"$S/volume.pid"; track_pid $!
  wait_http "$VP" || { log "volume server did not start"; tail "$T/volume.log"; exit 1; }
  # VOLUME_NO_WAIT=1: the filer is down on purpose (a test restarts it after this).
  [ -n "${VOLUME_NO_WAIT:-}" ] ||
    wait_live_volume "$FP" "$VP" || { log "the filer never saw the volume server"; tail "$T/volume.log"; exit 1; }
}

# mount DIR [flags...]: mounts; the pid goes to $S/mount-<basename of DIR>.pid
do_mount() {
  local dir=$1; shift
  mkdir -p "$dir"
  if [ -n "$FAKE" ]; then
    # shellcheck disable=SC2086  # FAKE_ARGS is a list of words
    "$FAKE" "$dir" ${FAKE_ARGS:-} >>"$T/mount.log" 2>&1 &
  else
    # shellcheck disable=SC2086  # MOUNT_FLAGS is a list of flags
    "$KELP" mount -dir="$dir" -filer="127.0.0.1:$FP" $MOUNT_FLAGS "$@" >>"$T/mount.log" 2>&1 &
  fi
  local pid=$!
  track_pid "$pid"; echo "$dir" >>"$S/mounts"; echo "$pid" >"$S/mount-$(basename "$dir").pid"
  wait_mount "$dir" || { log "mount of $dir did not come up"; tail "$T/mount.log"; exit 1; }
}
# unmount DIR: SIGTERM to its mount process (flush, unmount) and wait for it to end
do_unmount() {
  local pid
  pid=$(cat "$S/mount-$(basename "$1").pid")
  kill -TERM "$pid" || return 1
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  ! kill -0 "$pid" 2>/dev/null && ! grep -q " $1 " /proc/self/mountinfo
}

# within SECONDS 'COMMAND': the shell command succeeds within SECONDS (evaluated anew every
# 20 ms, so $(...) in it is too).
within() {
  local limit=$1; shift
  local deadline=$(($(date +%s%N) + limit * 1000000000))
  while ! eval "$*" 2>/dev/null; do
    [ "$(date +%s%N)" -lt "$deadline" ] || { echo "not within ${limit}s: $*"; return 1; }
    sleep 0.02
  done
}
# expect WHAT GOT WANT / expect_le WHAT GOT MAX: fails the check, saying what it saw.
expect() { [ "$2" = "$3" ] || { echo "$1: $2, expected $3"; return 1; }; }
expect_le() { [ "$2" -le "$3" ] || { echo "$1: $2, expected at most $3"; return 1; }; }
check() {  # check NAME: runs test_NAME in a subshell with set -e
  local name=$1 rc
  # Not as an `if` condition: bash ignores set -e inside one, and only a check's last command
  # could fail it.
  ( set -e; cd "$M"; "test_$name" ) >"$T/$name.out" 2>&1
  rc=$?
  if [ "$rc" = 0 ]; then
    echo "ok - $name"; PASSED=$((PASSED + 1))
  else
    echo "not ok - $name"; sed 's/^/#   /' "$T/$name.out" | tail -20; FAILED=$((FAILED + 1))
  fi
}

# metric URL NAME: the sum of every sample of metric NAME (any labels) at http://URL/metrics.
metric() {
  curl -fsS "http://$1/metrics" | awk -v n="$2" '$1 == n || index($1, n "{") == 1 { s += $NF } END { printf "%d\n", s }'
}
# volume_reads URL: blob bytes a volume server has sent (its own /metrics scrapes, which the
# request counters count, are not in it).
volume_reads() { metric "$1" 'kelp_volume_bytes_total{direction="out"}'; }
