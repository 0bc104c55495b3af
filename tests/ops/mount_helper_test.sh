#!/usr/bin/env bash
# mount.kelp, as mount(8) runs it for `mount -t kelp SRC DIR -o OPTS` and /etc/fstab (issue 16):
#   - it returns only once the mount is live (no waiting loop after it), detached (its daemon
#     outlives it, in a session of its own), with the -o options applied;
#   - `umount DIR` ends the daemon, and what was written is on the filer;
#   - an fstab-style option list (_netdev, nofail, noatime, x-systemd.*) is accepted;
#   - an unreachable filer, a misspelt option or a bad source fail the command with a
#     message, and leave nothing mounted and no process behind.
# mount(8) looks for /sbin/mount.kelp; the test runs a mount.kelp link from a temp folder with
# the same arguments (packaging/test-deb.sh runs the real `mount -t kelp` on an installed package).
# Usage: mount_helper_test.sh KELP_BINARY. Exit 0 passed, 1 failed.
set -uo pipefail
KELP=${1:?usage: mount_helper_test.sh KELP_BINARY}
FAKE=
# shellcheck source=tests/mount/lib.sh
source "$(dirname "$0")/../mount/lib.sh"
M=/
mkdir -p "$T/bin"
ln -s "$(realpath "$KELP")" "$T/bin/mount.kelp"
HELPER=$T/bin/mount.kelp
start_servers

# uploads: blob writes the volume server has answered.
uploads() {
  curl -fsS "http://127.0.0.1:$VP/metrics" | awk '/^kelp_volume_requests_total\{method="(PUT|POST)"/ { s += $NF } END { print s + 0 }'
}
# daemon_of DIR: the pid of the mount.kelp daemon serving DIR (its command line names it).
daemon_of() { pgrep -f -- "mount.kelp [^ ]* $1( |\$)" | head -1; }

test_mount_returns_when_live() {
  local m=$T/m1 pid
  mkdir -p "$m"
  echo "$m" >>"$S/mounts"
  "$HELPER" "127.0.0.1:$FP:/" "$m" -o "rw,chunkSizeLimitMB=1,cacheCapacityMB=0,logFile=$T/m1.log"
  grep -q " $m " /proc/self/mountinfo            # live the moment the helper returned
  pid=$(daemon_of "$m")
  track_pid "$pid"
  test -n "$pid"
  test "$(ps -o sid= -p "$pid" | tr -d ' ')" = "$pid"   # detached: its own session
  grep -q "fuse.kelp" <(grep " $m " /proc/self/mountinfo)
  # 3 MiB through 1 MiB chunks: -o chunkSizeLimitMB=1 reached kelp mount (3 uploads, not 1).
  local puts0
  puts0=$(uploads)
  head -c $((3 << 20)) /dev/urandom >"$m/blob"
  echo "uploads for a 3 MiB file: $(($(uploads) - puts0))"
  test $(($(uploads) - puts0)) -ge 3
  sha256sum <"$m/blob" >"$T/sum"
  umount "$m"
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  ! kill -0 "$pid" 2>/dev/null                   # umount ended the daemon
  test "$(curl -fsS "http://127.0.0.1:$FP/blob" | sha256sum)" = "$(cat "$T/sum")"
  grep -q "kelp mount: stopped" "$T/m1.log"      # -o logFile= took its log once up
}
check mount_returns_when_live

test_fstab_options_and_subdir() {
  local m=$T/m2 pid
  mkdir -p "$m"
  curl -fsS -X POST "http://127.0.0.1:$FP/api/v1/directories?path=/sub" >/dev/null
  echo inside | curl -fsS -T - "http://127.0.0.1:$FP/sub/x" >/dev/null
  echo "$m" >>"$S/mounts"
  "$HELPER" "127.0.0.1:$FP:/sub" "$m" -n -o "defaults,_netdev,nofail,noatime,nosuid,nodev,x-systemd.requires=kelp-server.service,ro,cacheCapacityMB=0"
  pid=$(daemon_of "$m"); track_pid "$pid"
  test "$(cat "$m/x")" = inside                  # the source's path is the mount's root
  ! touch "$m/y" 2>/dev/null                     # ro
  umount "$m"
}
check fstab_options_and_subdir

test_failures_leave_nothing() {
  local m=$T/m3 dead out rc
  mkdir -p "$m"
  dead=$(free_port)
  out=$("$HELPER" "127.0.0.1:$dead:/" "$m" -o connectTimeoutMs=300,cacheCapacityMB=0 2>&1) && rc=0 || rc=$?
  echo "unreachable filer: rc=$rc: $out"
  test "$rc" != 0
  echo "$out" | grep -q "cannot reach the filer"
  out=$("$HELPER" "127.0.0.1:$FP:/" "$m" -o chunkSizeLimitMBB=4 2>&1) && rc=0 || rc=$?
  echo "misspelt option: rc=$rc: $out"
  test "$rc" != 0
  echo "$out" | grep -q "chunkSizeLimitMBB"
  out=$("$HELPER" "127.0.0.1/" "$m" 2>&1) && rc=0 || rc=$?
  echo "bad source: rc=$rc: $out"
  test "$rc" = 1
  ! grep -q " $m " /proc/self/mountinfo
  test -z "$(daemon_of "$m")"
  # -f: the command it would run, nothing mounted
  "$HELPER" "127.0.0.1:$FP:/" "$m" -f -o cacheCapacityMB=0 2>&1 | grep -q -- "kelp mount -dir=$m -filer=127.0.0.1:$FP"
  ! grep -q " $m " /proc/self/mountinfo
}
check failures_leave_nothing

echo "# passed $PASSED, failed $FAILED"
[ "$FAILED" = 0 ]
