#!/usr/bin/env bash
# Issue 15 through real mounts: a PostgreSQL 15 started here (initdb in a temporary directory,
# as the postgres user when run as root, on a Unix socket only), two `kelp filer
# -store=postgres` on it, a volume server following their coordinator, and a mount on each
# filer, each given both filers (its own first: -filer=a,b and -filer=b,a).
#  - a change made through one mount is seen through the other (the event log is in the
#    store and every filer tails it);
#  - concurrent creates and renames in one directory from both mounts lose nothing;
#  - kill -9 of one filer while its mount writes: the mount moves to the other filer, the
#    writes go on, and every file whose close(2) returned reads back whole through both;
#  - the same with the other filer hung (SIGSTOP) rather than dead: its mounts move after one
#    call's -rpcTimeoutMs, and everything acknowledged reads back whole through both;
#  - filer.fsck on the store is clean once the filers are stopped.
#
#   multi_filer_mount_test.sh KELP_BINARY
# Exit: 0 all passed, 1 a check failed.
set -uo pipefail
KELP=${1:-}
[ -x "$KELP" ] || { echo "usage: $0 KELP_BINARY"; exit 2; }
KELP=$(realpath "$KELP")
MOUNT_FLAGS="-chunkSizeLimitMB=1 -writeBufferSizeMB=16 -cacheCapacityMB=0 -rpcTimeoutMs=2000"
FAKE=""
# shellcheck source=tests/mount/lib.sh
source "$(dirname "$0")/lib.sh"

PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
[ -x "$PG_BIN/initdb" ] || { echo "no PostgreSQL at $PG_BIN (scripts/install-deps.sh installs postgresql-15)"; exit 1; }
PGD=$(mktemp -d /tmp/kelp-pg-test.XXXXXX)
PG_PID=""
pg_stop() {
  if [ -n "$PG_PID" ]; then
    kill -INT "$PG_PID" 2>/dev/null  # fast shutdown
    for _ in $(seq 100); do kill -0 "$PG_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$PG_PID" 2>/dev/null
  fi
  rm -rf "$PGD"
}
# The mounts and kelp processes first (they hold connections), then PostgreSQL.
trap 'cleanup; pg_stop' EXIT

AS=()
if [ "$(id -u)" = 0 ]; then
  chown postgres "$PGD"
  AS=(runuser -u postgres --)
fi
"${AS[@]}" "$PG_BIN/initdb" -D "$PGD/data" -A trust -U postgres -E UTF8 --locale=C >"$PGD/initdb.log" 2>&1 ||
  { log "initdb failed"; tail "$PGD/initdb.log"; exit 1; }
"${AS[@]}" "$PG_BIN/postgres" -D "$PGD/data" -k "$PGD" -c listen_addresses= -c max_connections=200 \
  >"$PGD/postgres.log" 2>&1 &
for _ in $(seq 100); do
  "$PG_BIN/pg_isready" -q -h "$PGD" && break
  sleep 0.1
done
"$PG_BIN/pg_isready" -q -h "$PGD" || { log "postgres did not start"; tail "$PGD/postgres.log"; exit 1; }
PG_PID=$(head -1 "$PGD/data/postmaster.pid")  # the postmaster (runuser is its parent)
DSN="host=$PGD user=postgres dbname=postgres"
STORE=(-store=postgres "-store.dsn=$DSN" -store.keyspace=mounts)

# start_filer N: filer N (1 or 2) on port FP<N>; its pid in $S/filer<N>.pid
FP1=$(free_port)
FP2=$(free_port)
start_filer() {
  local port
  port=$([ "$1" = 1 ] && echo "$FP1" || echo "$FP2")
  "$KELP" filer -dir="$T/filer$1" -port="$port" "${STORE[@]}" -coordinator.leaseMs=2000 -pulseMs=300 \
    >>"$T/filer$1.log" 2>&1 &
  echo $! >"$S/filer$1.pid"; track_pid $!
  wait_http "$port" || { log "filer $1 did not start"; tail "$T/filer$1.log"; exit 1; }
}
start_filer 1
start_filer 2
VP=$(free_port)
"$KELP" volume -dir="$T/vol" -port="$VP" -filer="127.0.0.1:$FP1,127.0.0.1:$FP2" -pulseMs=300 >>"$T/volume.log" 2>&1 &
track_pid $!
wait_http "$VP" || { log "volume server did not start"; tail "$T/volume.log"; exit 1; }
# writable once the coordinator (either filer) knows the volume server
alive_at() { curl -fsS "http://127.0.0.1:$1/status" | grep -Eq '"alive": *true'; }
within 20 'alive_at "$FP1" || alive_at "$FP2"' || exit 1

M=$T/mnt1
M2=$T/mnt2
FP=$FP1 do_mount "$M" -filer="127.0.0.1:$FP1,127.0.0.1:$FP2"
FP=$FP2 do_mount "$M2" -filer="127.0.0.1:$FP2,127.0.0.1:$FP1"

test_changes_seen_across() {
  mkdir -p d1
  head -c 300000 /dev/urandom >d1/data
  within 3 'cmp -s d1/data "$M2/d1/data"'
  mv d1/data d1/moved
  within 3 'test ! -e "$M2/d1/data" && cmp -s d1/moved "$M2/d1/moved"'
  chmod 600 "$M2/d1/moved"
  within 3 'test "$(stat -c %a d1/moved)" = 600'
  echo other >"$M2/d1/from2"
  within 3 'grep -qx other d1/from2'
  rm "$M2/d1/from2"
  within 3 'test ! -e d1/from2'
}

test_concurrent_creates_and_renames() {
  mkdir -p shared
  within 3 'test -d "$M2/shared"'
  # Each mount creates 100 files in the directory and renames each right after; both at once.
  work() {  # work DIR TAG
    local i
    for i in $(seq 100); do
      echo "$2 $i" >"$1/shared/$2-$i"
      mv "$1/shared/$2-$i" "$1/shared/r-$2-$i"
    done
  }
  work "$M" a &
  local pa=$!
  work "$M2" b &
  local pb=$!
  wait "$pa"
  wait "$pb"
  local want  # used by within (eval)
  # shellcheck disable=SC2034
  want=$( (for i in $(seq 100); do echo "r-a-$i"; echo "r-b-$i"; done) | sort)
  within 3 'test "$(ls shared | sort)" = "$want"'
  within 3 'test "$(ls "$M2/shared" | sort)" = "$want"'
  grep -qx "b 77" shared/r-b-77
  grep -qx "a 77" "$M2/shared/r-a-77"
}

test_kill_filer_mount_moves() {
  mkdir -p w
  within 3 'test -d "$M2/w"'
  local pid1 done_before
  pid1=$(cat "$S/filer1.pid")
  # Write files through mount 1 (on filer 1); a file counts once close(2) returned 0.
  : >"$T/acked"
  writer w "$T/acked" &
  local writer=$!
  within 30 'test "$(wc -l <"$T/acked")" -ge 30'
  kill -KILL "$pid1"
  done_before=$(wc -l <"$T/acked")
  echo "killed filer 1 after $done_before files"
  # The writes go on through filer 2.
  within 30 'test "$(wc -l <"$T/acked")" -ge $((done_before + 50))'
  touch "$T/stop"
  wait "$writer"
  echo "$(wc -l <"$T/acked") files acknowledged"
  # Mount 1 talks to filer 2 now, and every acknowledged file is whole on both sides.
  curl -fsS "http://127.0.0.1:$FP2/status" >/dev/null
  same_on_both "$T/acked" w "$M2/w" $((done_before + 50))
  # A new file through mount 1 is seen through mount 2.
  echo after >w/after
  within 3 'grep -qx after "$M2/w/after"'
}

# writer DIR ACKED: writes files into DIR until $T/stop exists; a file counts (a line in
# ACKED) once close(2) and the rename returned 0.
writer() {
  local i
  for ((i = 1; ; i++)); do
    if head -c $((1000 + i * 37)) /dev/urandom >"$1/f$i.tmp" 2>/dev/null && mv "$1/f$i.tmp" "$1/f$i" 2>/dev/null; then
      echo "f$i" >>"$2"
    else
      sleep 0.05  # e.g. no coordinator for a moment: try the next file
    fi
    [ -e "$T/stop" ] && break
  done
}

# same_on_both ACKED A B MIN: every file named in ACKED reads the same in A and in B (within
# 10 s each: the other mount may learn of it late), and ACKED names at least MIN files.
same_on_both() {
  local f n=0
  # shellcheck disable=SC2034  # f is used by within (eval)
  while read -r f; do
    within 10 "cmp -s \"$2/\$f\" \"$3/\$f\""
    n=$((n + 1))
  done <"$1"
  test "$n" -ge "$4"
}

test_hung_filer_mount_moves() {
  # Filer 1 is back (a fresh process; the store kept everything), and filer 2, which both
  # mounts use now, hangs: no answer, no closed connection.
  start_filer 1
  rm -f "$T/stop"
  mkdir -p "$M2/h"
  : >"$T/acked2"
  writer "$M2/h" "$T/acked2" &
  local w=$! pid2 before t0 t1
  within 30 'test "$(wc -l <"$T/acked2")" -ge 30'
  pid2=$(cat "$S/filer2.pid")
  kill -STOP "$pid2"
  before=$(wc -l <"$T/acked2")
  t0=$(date +%s%N)
  within 30 'test "$(wc -l <"$T/acked2")" -ge $((before + 1))'
  t1=$(date +%s%N)
  echo "# figure: filer 2 stopped after $before files; the next file was acknowledged $(((t1 - t0) / 1000000)) ms later (-rpcTimeoutMs=2000)" | tee -a "$T/figures"
  within 30 'test "$(wc -l <"$T/acked2")" -ge $((before + 50))'
  touch "$T/stop"
  wait "$w"
  kill -CONT "$pid2"
  echo "$(wc -l <"$T/acked2") files acknowledged"
  same_on_both "$T/acked2" "$M2/h" h $((before + 50))
}

check changes_seen_across
check concurrent_creates_and_renames
check kill_filer_mount_moves
check hung_filer_mount_moves

# Unmount, stop the filers (they release the lease), and check the store.
do_unmount "$M" || { log "unmount of $M failed"; FAILED=$((FAILED + 1)); }
do_unmount "$M2" || { log "unmount of $M2 failed"; FAILED=$((FAILED + 1)); }
for n in 1 2; do
  kill -CONT "$(cat "$S/filer$n.pid")" 2>/dev/null
  kill -TERM "$(cat "$S/filer$n.pid")" 2>/dev/null
  for _ in $(seq 100); do kill -0 "$(cat "$S/filer$n.pid")" 2>/dev/null || break; sleep 0.1; done
done
# The killed filer's lease (2 s) must run out before fsck may run.
fsck_clean() { "$KELP" filer.fsck "${STORE[@]}" >"$T/fsck.out" 2>&1 && grep -q clean "$T/fsck.out"; }
if within 20 fsck_clean; then
  echo "ok - fsck_clean"; PASSED=$((PASSED + 1))
else
  echo "not ok - fsck_clean"; sed 's/^/#   /' "$T/fsck.out" | tail -20; FAILED=$((FAILED + 1))
fi

cat "$T/figures" 2>/dev/null
echo "# $PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
