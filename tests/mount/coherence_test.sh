#!/usr/bin/env bash
# Two real mounts of one filer, and the shortcuts that save round trips (docs/mount.md, "Round
# trips"): every change made through one mount (or the HTTP API) is seen through the other
# within 1 s, although both cache names and attributes for 30 s; files created here carry their
# chmod/chown/utimes to the filer in the same call as their data; a directory this mount made
# or listed answers "no such name" without asking the filer; a mount is not sent the events of
# its own changes. Each shortcut is checked by the
# filer calls the mount made (its /metrics), and a mount killed with kill -9 in the middle of
# writing many files loses nothing that close(2) returned for. filer.fsck is clean at the end.
#
#   coherence_test.sh KELP_BINARY
# Exit: 0 all passed, 1 a check failed.
set -uo pipefail
KELP=${1:-}
[ -x "$KELP" ] || { echo "usage: $0 KELP_BINARY"; exit 2; }
KELP=$(realpath "$KELP")
MOUNT_FLAGS="-chunkSizeLimitMB=1 -writeBufferSizeMB=16 -cacheCapacityMB=0"
FAKE=""
# shellcheck source=tests/mount/lib.sh
source "$(dirname "$0")/lib.sh"

# calls PORT METHOD: filer calls the mount with -metricsPort=PORT has made of METHOD.
calls() { metric "127.0.0.1:$1" "kelp_filer_client_calls_total{client=\"mount\",method=\"$2\"}"; }
# by_method PORT: "method count" lines of the mount's filer calls, to say which ones a check
# did not expect.
by_method() {
  curl -fsS "http://127.0.0.1:$1/metrics" |
    sed -n 's/^kelp_filer_client_calls_total{.*method="\([A-Za-z]*\)".* \([0-9]*\)$/\1 \2/p' | sort
}
# Calls an application waits for: all but the releases and keep-alives the mount sends in the
# background, from one scrape (three scrapes would race with a keep-alive).
all_calls() {
  curl -fsS "http://127.0.0.1:$1/metrics" | awk '
    index($1, "kelp_filer_client_calls_total{") == 1 && $1 !~ /method="(Release|KeepAlive)"/ { s += $NF }
    END { printf "%d\n", s }'
}

start_servers
MP1=$(free_port)
MP2=$(free_port)
M=$T/mnt1
M2=$T/mnt2
do_mount "$M" -metricsPort="$MP1"
do_mount "$M2" -metricsPort="$MP2"

test_create_seen() {
  mkdir -p d1
  ! stat "$M2/d1/new" 2>/dev/null || exit 1  # mount two now caches "no such name"
  echo data >d1/new
  within 1 'test -e "$M2/d1/new"'
  within 1 'grep -qx data "$M2/d1/new"'
}

test_unlink_rename_seen() {
  mkdir -p d2
  echo a >d2/gone
  echo b >d2/from
  within 1 'test -e "$M2/d2/gone"'
  stat "$M2/d2/from" >/dev/null   # cached positively over there
  rm d2/gone
  mv d2/from d2/to
  within 1 'test ! -e "$M2/d2/gone"'
  within 1 'test ! -e "$M2/d2/from"'
  within 1 'grep -qx b "$M2/d2/to"'
}

test_chmod_truncate_seen() {
  head -c 10000 /dev/urandom >f3
  within 1 'test "$(stat -c %s "$M2/f3" 2>/dev/null)" = 10000'
  chmod 600 f3
  within 1 'test "$(stat -c %a "$M2/f3")" = 600'
  truncate -s 123 f3
  within 1 'test "$(stat -c %s "$M2/f3")" = 123'
  test "$(cmp f3 "$M2/f3" && echo same)" = same
  # And the other way round.
  chmod 640 "$M2/f3"
  within 1 'test "$(stat -c %a f3)" = 640'
}

test_http_api_seen() {
  mkdir -p d4
  ls d4 >/dev/null  # listed: this mount now answers lookups in d4 itself
  curl -fsS -X PUT --data-binary "via http" "http://127.0.0.1:$FP/d4/fromhttp" >/dev/null
  within 1 'grep -qx "via http" d4/fromhttp'
  within 1 'grep -qx "via http" "$M2/d4/fromhttp"'
}

test_listing_kept_current() {
  mkdir -p "$M2/d5"
  for i in $(seq 20); do echo "$i" >"$M2/d5/f$i"; done
  within 1 'test -e d5/f20'
  ls d5 >/dev/null                  # mount one lists d5 to the end: it knows every name
  ! stat d5/late 2>/dev/null || exit 1
  echo late >"$M2/d5/late"          # made through the other mount
  within 1 'grep -qx late d5/late'
  rm "$M2/d5/f1"
  within 1 'test ! -e d5/f1'
}

# tar's per-file sequence (a negative lookup, create, write, chown, chmod, utimes, close)
# costs two filer calls: the create, and the commit carrying the data and the attributes.
test_untar_round_trips() {
  mkdir -p src/sub
  for i in $(seq 100); do head -c $((i * 37 + 1)) /dev/urandom >"src/sub/f$i"; done
  chmod 640 src/sub/f*
  touch -d '2001-02-03 04:05:06' src/sub/f*
  tar cf "$T/round.tar" -C src sub
  mkdir untar
  local before after lookups setattrs
  before=$(all_calls "$MP1")
  lookups=$(calls "$MP1" Lookup)
  setattrs=$(calls "$MP1" SetAttr)
  tar xf "$T/round.tar" -C untar --same-owner
  after=$(all_calls "$MP1")
  echo "filer calls for 100 files + 1 directory: $((after - before))"
  test $((after - before)) -le 205
  echo "lookups: $(($(calls "$MP1" Lookup) - lookups)), setattrs: $(($(calls "$MP1" SetAttr) - setattrs))"
  # Every negative lookup (101 new names) answered here; a loaded machine may take over the
  # entry timeout, and the kernel then revalidates "untar" or "sub" with a positive lookup.
  test $(($(calls "$MP1" Lookup) - lookups)) -le 2
  test $(($(calls "$MP1" SetAttr) - setattrs)) -le 3  # the directory's owner, mode and times
  diff -r src untar/.   # bytes
  test "$(stat -c '%a %Y' untar/sub/f7)" = "640 $(date -d '2001-02-03 04:05:06' +%s)"
  # Seen the same way from the other mount, and after the caches are dropped.
  local want
  want="640 $(date -d '2001-02-03 04:05:06' +%s)"
  within 1 'test "$(stat -c "%a %Y" "$M2/untar/sub/f7" 2>/dev/null)" = "$want"'
  echo 3 >/proc/sys/vm/drop_caches
  test "$(stat -c '%a %Y %s' untar/sub/f99)" = "640 $(date -d '2001-02-03 04:05:06' +%s) $((99 * 37 + 1))"
}

# A stat with fresh attributes costs no call, ls -l one listing call per page, rm -rf no lookup.
test_stat_ls_rm_round_trips() {
  mkdir -p d6
  for i in $(seq 300); do : >"d6/e$i"; done
  local before
  stat d6/e1 >/dev/null
  before=$(all_calls "$MP1")
  local methods
  methods=$(by_method "$MP1")
  # One process for all 300: a stat process per name took over the 30 s attribute and entry
  # timeouts of the root and d6 on a loaded CI machine (reproduced here at nice 10 beside two
  # busy loops), and the kernel asked again.
  stat d6/e{1..300} >/dev/null
  expect "filer calls for 300 stats with fresh attributes" "$(($(all_calls "$MP1") - before))" 0 ||
    { diff <(echo "$methods") <(by_method "$MP1"); return 1; }
  echo 3 >/proc/sys/vm/drop_caches
  before=$(all_calls "$MP1")
  expect "lines of ls -l" "$(ls -l d6 | wc -l)" 301
  expect_le "filer calls for ls -l of 300 entries" "$(($(all_calls "$MP1") - before))" 3
  echo 3 >/proc/sys/vm/drop_caches
  before=$(calls "$MP1" Lookup)
  local unlinks behind batches
  unlinks=$(calls "$MP1" Unlink)
  behind=$(metric "127.0.0.1:$MP1" kelp_mount_unlinks_behind_total)
  batches=$(calls "$MP1" UnlinkBatch)
  rm -rf d6
  expect "Lookup calls for rm -rf" "$(($(calls "$MP1" Lookup) - before))" 0
  # Each of the 300 unlinks once: behind (sent in UnlinkBatch calls, several a call when they
  # pile up) or, when not, one Unlink call.
  expect "unlinks for rm -rf" \
    "$(($(calls "$MP1" Unlink) - unlinks + $(metric "127.0.0.1:$MP1" kelp_mount_unlinks_behind_total) - behind))" 300
  expect_le "UnlinkBatch calls for rm -rf" "$(($(calls "$MP1" UnlinkBatch) - batches))" 300
  within 1 'test ! -e "$M2/d6"'
}

# A mount's event stream leaves out its own changes (skip_own): 200 changes made here reach mount
# two as events, and mount one gets only the change mount two made after them.
test_own_changes_not_sent() {
  mkdir -p d7
  local mine theirs
  mine=$(metric "127.0.0.1:$MP1" kelp_mount_events_total)
  theirs=$(metric "127.0.0.1:$MP2" kelp_mount_events_total)
  for i in $(seq 100); do : >"d7/f$i"; done
  rm -f d7/f*
  within 5 'test "$(metric "127.0.0.1:$MP2" kelp_mount_events_total)" -ge $((theirs + 200))'
  : >"$M2/d7/marker"
  within 1 'test -e d7/marker'
  within 1 'test "$(metric "127.0.0.1:$MP1" kelp_mount_events_total)" -gt "$mine"'
  expect_le "events mount one applied for its own 200 changes and one of mount two's" \
    "$(($(metric "127.0.0.1:$MP1" kelp_mount_events_total) - mine))" 3
}

# kill -9 of a mount in the middle of writing files: every file whose close(2) returned is
# there, byte for byte, with the mode and times set before its close.
test_kill9_mid_writes() {
  mkdir -p k9
  cat >"$T/writer.py" <<'PY'
import hashlib, os, sys
log = open(sys.argv[1], "w")
for i in range(100000):
    name = "k9/f%d" % i
    data = hashlib.sha256(str(i).encode()).digest() * (1 + i % 200)
    try:
        fd = os.open(name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        os.write(fd, data)
        os.fchmod(fd, 0o600 + (i % 7))
        os.utime(fd, ns=(i * 1000, 1_000_000_000 + i))
        os.close(fd)
    except OSError:
        break
    log.write("%d\n" % i)
    log.flush()
PY
  : >"$T/closed.log"
  python3 "$T/writer.py" "$T/closed.log" &
  local writer=$!
  within 20 'test "$(wc -l <"$T/closed.log")" -ge 300'
  kill -KILL "$(cat "$S/mount-$(basename "$M").pid")"
  wait "$writer" 2>/dev/null || true
  cd /
  fusermount3 -uz "$M" 2>/dev/null || true
  do_mount "$M" -metricsPort="$MP1"
  cd "$M"
  local n
  n=$(wc -l <"$T/closed.log")
  echo "files closed before the kill: $n"
  python3 - "$T/closed.log" <<'PY'
import hashlib, os, sys
for line in open(sys.argv[1]):
    i = int(line)
    name = "k9/f%d" % i
    want = hashlib.sha256(str(i).encode()).digest() * (1 + i % 200)
    assert open(name, "rb").read() == want, name
    st = os.stat(name)
    assert st.st_mode & 0o777 == 0o600 + (i % 7), (name, oct(st.st_mode))
    assert st.st_mtime_ns == 1_000_000_000 + i, (name, st.st_mtime_ns)
PY
}

for c in create_seen unlink_rename_seen chmod_truncate_seen http_api_seen listing_kept_current \
         untar_round_trips stat_ls_rm_round_trips own_changes_not_sent kill9_mid_writes; do check "$c"; done

test_fsck_clean() {
  cd /
  do_unmount "$M2"
  do_unmount "$M"
  kill -TERM "$FILER_PID"
  for _ in $(seq 100); do kill -0 "$FILER_PID" 2>/dev/null || break; sleep 0.1; done
  "$KELP" filer.fsck -dir="$T/filer"
}
check fsck_clean

echo "# passed $PASSED, failed $FAILED"
[ "$FAILED" = 0 ]
