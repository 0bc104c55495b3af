#!/usr/bin/env bash
# systemd readiness without systemd (issue 16): each long-running command, started with
# NOTIFY_SOCKET pointing at a socket this test listens on, sends READY=1 only once it serves
# (its port answers, the mount is live), and STOPPING=1 on SIGTERM.
#   kelp filer, kelp volume, kelp server, kelp mount.
# Usage: notify_test.sh KELP_BINARY. Exit 0 passed, 1 failed.
set -uo pipefail
KELP=${1:?usage: notify_test.sh KELP_BINARY}
FAKE=
MOUNT_FLAGS="-cacheCapacityMB=0"
# shellcheck source=tests/mount/lib.sh
source "$(dirname "$0")/../mount/lib.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
M=/

python3 "$HERE/notify_listen.py" "$T/notify.sock" "$T/notify.out" &
track_pid $!
for _ in $(seq 100); do [ -e "$T/notify.out" ] && break; sleep 0.05; done

# wait_message TEXT: until notify.out has a line containing TEXT after line $FROM.
wait_message() {
  for _ in $(seq 200); do tail -n +"$FROM" "$T/notify.out" | grep -q "$1" && return 0; sleep 0.05; done
  echo "no '$1' on the notify socket; it got:"; cat "$T/notify.out"
  return 1
}
mark() { FROM=$(($(wc -l <"$T/notify.out") + 1)); }

test_filer() {
  local fp pid
  fp=$(free_port)
  mark
  NOTIFY_SOCKET=$T/notify.sock "$KELP" filer -dir="$T/f1" -port="$fp" >"$T/f1.log" 2>&1 &
  pid=$!; track_pid "$pid"
  wait_message "READY=1"
  # Ready means serving: the port answers at once, no retry.
  curl -fsS "http://127.0.0.1:$fp/status" >/dev/null
  tail -n +"$FROM" "$T/notify.out" | grep "READY=1" | grep -q "STATUS=serving on 127.0.0.1:$fp"
  mark
  kill -TERM "$pid"
  wait "$pid"
  wait_message "STOPPING=1"
}
check filer

test_volume_and_server() {
  local fp vp pid
  fp=$(free_port); vp=$(free_port)
  mark
  NOTIFY_SOCKET=$T/notify.sock "$KELP" server -dir="$T/s1" -filer.port="$fp" -volume.port="$vp" >"$T/s1.log" 2>&1 &
  pid=$!; track_pid "$pid"
  wait_message "READY=1"
  curl -fsS "http://127.0.0.1:$fp/status" >/dev/null
  curl -fsS "http://127.0.0.1:$vp/status" >/dev/null
  local vp2 vpid
  vp2=$(free_port)
  mark
  NOTIFY_SOCKET=$T/notify.sock "$KELP" volume -dir="$T/v2" -port="$vp2" -filer="127.0.0.1:$fp" >"$T/v2.log" 2>&1 &
  vpid=$!; track_pid "$vpid"
  wait_message "READY=1"
  curl -fsS "http://127.0.0.1:$vp2/status" >/dev/null
  mark
  kill -TERM "$vpid"; wait "$vpid"
  wait_message "STOPPING=1"
  mark
  kill -TERM "$pid"; wait "$pid"
  wait_message "STOPPING=1"
}
check volume_and_server

test_mount() {
  local m=$T/m pid
  start_servers
  mkdir -p "$m"
  mark
  NOTIFY_SOCKET=$T/notify.sock "$KELP" mount -dir="$m" -filer="127.0.0.1:$FP" -cacheCapacityMB=0 >"$T/m.log" 2>&1 &
  pid=$!; track_pid "$pid"; echo "$m" >>"$S/mounts"
  wait_message "READY=1"
  # Ready means mounted: the mount point is live at once.
  grep -q " $m " /proc/self/mountinfo
  echo hello >"$m/f"
  mark
  kill -TERM "$pid"; wait "$pid"
  wait_message "STOPPING=1"
  ! grep -q " $m " /proc/self/mountinfo
  test "$(curl -fsS "http://127.0.0.1:$FP/f")" = hello
}
check mount

echo "# passed $PASSED, failed $FAILED"
[ "$FAILED" = 0 ]
