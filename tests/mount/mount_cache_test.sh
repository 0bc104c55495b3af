#!/usr/bin/env bash
# The tiered read cache through a real mount (issue 5, item 7): `kelp filer` + `kelp volume` on
# loopback, data written through a mount without cache, read through mounts with one.
#   - a second sequential pass is served from the cache: the volume server sends no blob byte;
#   - blobs land in their tier by size: small files in small, 1 MiB files in medium, 4 MiB
#     chunks in large (per-tier insert metrics and the tier directories);
#   - a remount with the same -cacheDir is warm (hits, no volume read), and the unmount logs a summary;
#   - a corrupted entry file still reads correct data (checksum failure counted, refetched);
#   - -cacheCapacityMB=0 creates nothing under -cacheDir;
#   - a long random-read workload keeps `du -s` of the cache dir within -cacheCapacityMB;
#   - two mounts without -cacheDir each get a disk cache of their own (issue 16);
#   - journaled bytes past -journalMemoryMB are let go and read back right (issue 13);
#   - local reads: a stream's 4 MiB chunks are read from the volume's file, with no copy in the
#     cache and no byte over HTTP; with -localReads=false, over HTTP (issue 13).
# Usage: mount_cache_test.sh KELP_BINARY. Exit: 0 passed, 1 failed, 77 skipped.
set -uo pipefail
KELP=${1:-}
FAKE=
MOUNT_FLAGS="-chunkSizeLimitMB=4 -writeBufferSizeMB=64"
# shellcheck source=tests/mount/lib.sh
source "$(dirname "$0")/lib.sh"

[ -x "$KELP" ] || { echo "usage: $0 KELP_BINARY"; exit 2; }
case "$("$KELP" volume -h 2>&1)" in *"not built yet"*) echo "# skip: kelp volume not built yet"; exit 77 ;; esac
start_servers
V="127.0.0.1:$VP"
MP=$(free_port)          # the caching mount's -metricsPort
MU="127.0.0.1:$MP"
C=$T/c                    # the caching mount
CACHE=$T/cache
# -readAheadMB=1: read-ahead windows hold 16 MiB at most, less than big.bin, so a second pass
# cannot be served from them: it is the disk cache or the network.
# -localReads=false: the volume server is on this machine, and with local reads a window that
# reads a whole blob leaves it out of the cache (test_local_reads_of_a_stream below).
CACHE_FLAGS=(-cacheCapacityMB=256 -cacheDir="$CACHE" -metricsPort="$MP" -readAheadMB=1 -localReads=false)

# Data, written through a mount without cache (so nothing is cached by write-through).
M=$T/w; do_mount "$M" -cacheCapacityMB=0
(
  set -e
  cd "$M"
  head -c $((40 << 20)) /dev/urandom >big.bin                 # ten 4 MiB chunks: large tier
  mkdir small med
  for i in $(seq 40); do head -c 20000 /dev/urandom >"small/f$i"; done   # small tier
  for i in 1 2 3; do head -c $((1 << 20)) /dev/urandom >"med/m$i"; done  # medium tier
  sha256sum big.bin small/* med/* >"$T/sums"
) || { log "writing the data failed"; exit 1; }
do_mount "$C" "${CACHE_FLAGS[@]}"
M=$C

tier() { metric "$MU" "kelp_cache_$1_total{tier=\"$2\"}"; }

test_second_pass_from_cache() {
  local g0 g1 h1
  g0=$(volume_reads "$V")
  grep ' big.bin$' "$T/sums" | sha256sum -c --quiet
  g1=$(volume_reads "$V")
  echo "first pass: $((g1 - g0)) bytes from the volume server"
  test "$g1" -gt "$g0"
  test "$(tier inserts large)" -gt 0
  test "$(tier inserts small)" = 0
  test "$(tier inserts medium)" = 0
  h1=$(metric "$MU" kelp_cache_hits_total)
  echo 3 >/proc/sys/vm/drop_caches
  grep ' big.bin$' "$T/sums" | sha256sum -c --quiet
  echo "second pass: $(($(volume_reads "$V") - g1)) bytes from the volume server, $(($(metric "$MU" kelp_cache_hits_total) - h1)) hits"
  test "$(volume_reads "$V")" = "$g1"
  test "$(metric "$MU" kelp_cache_hits_total)" -gt "$h1"
}
check second_pass_from_cache

test_tiers() {
  local large small medium
  large=$(tier inserts large)
  cat small/* >/dev/null
  small=$(tier inserts small)
  echo "small files: $small small-tier inserts"
  test "$small" -ge 40
  test "$(tier inserts medium)" = 0
  test "$(tier inserts large)" = "$large"
  cat med/* >/dev/null
  medium=$(tier inserts medium)
  echo "1 MiB files: $medium medium-tier inserts"
  test "$medium" -ge 3
  test "$(tier inserts small)" = "$small"
  test "$(tier inserts large)" = "$large"
  test "$(ls "$CACHE/small" | wc -l)" -ge 40
  test "$(ls "$CACHE/medium" | wc -l)" -ge 3
  test "$(ls "$CACHE/large" | wc -l)" -ge 10
  test "$(metric "$MU" 'kelp_cache_entries{tier="small"}')" -ge 40
}
check tiers

test_remount_keeps_hits() {
  local g0
  cd /
  do_unmount "$C"
  grep -q "cache: hits" "$T/mount.log"
  do_mount "$C" "${CACHE_FLAGS[@]}"
  cd "$C"
  echo 3 >/proc/sys/vm/drop_caches
  g0=$(volume_reads "$V")
  sha256sum -c --quiet "$T/sums"
  echo "after remount: $(($(volume_reads "$V") - g0)) bytes from the volume server, $(metric "$MU" kelp_cache_hits_total) hits," \
    "$(metric "$MU" kelp_cache_misses_total) misses"
  test "$(volume_reads "$V")" = "$g0"
  test "$(metric "$MU" kelp_cache_hits_total)" -gt 0
  test "$(metric "$MU" kelp_cache_misses_total)" = 0
}
check remount_keeps_hits

test_corrupt_entry_reads_correct_data() {
  local g0 f size
  # Flip the last 64 bytes (block data) of every large-tier entry.
  for f in "$CACHE"/large/*; do
    size=$(stat -c %s "$f")
    head -c 64 /dev/urandom | dd of="$f" bs=1 seek=$((size - 64)) conv=notrunc 2>/dev/null
  done
  echo 3 >/proc/sys/vm/drop_caches
  g0=$(volume_reads "$V")
  grep ' big.bin$' "$T/sums" | sha256sum -c --quiet
  echo "checksum failures: $(metric "$MU" kelp_cache_checksum_failures_total)," \
    "refetched with $(($(volume_reads "$V") - g0)) bytes from the volume server"
  test "$(metric "$MU" kelp_cache_checksum_failures_total)" -gt 0
  test "$(volume_reads "$V")" -gt "$g0"
  # A corrupt entry is dropped when read and the refetch re-inserts it; blocks the refetch
  # brought that were still indexed (corrupt, not read yet) stay until read. So every pass reads
  # correct data and replaces some, until a pass is clean and local again.
  local pass
  for pass in 2 3 4 5 6 7 8; do
    echo 3 >/proc/sys/vm/drop_caches
    g0=$(volume_reads "$V")
    grep ' big.bin$' "$T/sums" | sha256sum -c --quiet
    echo "pass $pass: $(($(volume_reads "$V") - g0)) bytes from the volume server," \
      "checksum failures $(metric "$MU" kelp_cache_checksum_failures_total)"
    [ "$(volume_reads "$V")" = "$g0" ] && break
  done
  test "$(volume_reads "$V")" = "$g0"
}
check corrupt_entry_reads_correct_data

test_capacity_zero_writes_nothing() {
  local z=$T/z
  cd /
  do_mount "$z" -cacheCapacityMB=0 -cacheDir="$T/zcache"
  cd "$z"
  echo 3 >/proc/sys/vm/drop_caches
  sha256sum -c --quiet "$T/sums"
  echo data >"written.txt"
  head -c 5000000 /dev/urandom >written.bin
  cat written.bin >/dev/null
  cd /
  do_unmount "$z"
  test ! -e "$T/zcache"
}
check capacity_zero_writes_nothing

test_du_within_capacity() {
  local d=$T/d cap_mb=8 dp
  dp=$(free_port)
  cd /
  do_mount "$d" -cacheCapacityMB=$cap_mb -cacheDir="$T/dcache" -metricsPort="$dp"
  cd "$d"
  # 16 KiB random reads over big.bin, medium and small files (dropping the kernel's copy so
  # every read reaches the mount); du sampled throughout.
  python3 - "$T/dcache" $((cap_mb * 1024)) <<'PY'
import os, random, sys
cache, cap_kib = sys.argv[1], int(sys.argv[2])
random.seed(5)
names = ["big.bin"] * 6 + ["med/m%d" % i for i in (1, 2, 3)] + ["small/f%d" % i for i in range(1, 41)]
fds = {n: os.open(n, os.O_RDONLY) for n in set(names)}
sizes = {n: os.fstat(fd).st_size for n, fd in fds.items()}
def du_kib(root):
    # What du -sk counts, but a file the cache evicts (or a background fill renames) between
    # the listing and the stat is skipped instead of failing the walk.
    total = 0
    for d, _, files in os.walk(root):
        for f in files:
            try:
                total += os.lstat(os.path.join(d, f)).st_blocks * 512
            except FileNotFoundError:
                pass
    return total // 1024
worst = 0
for i in range(6000):
    n = random.choice(names)
    off = random.randrange(0, max(1, sizes[n] - 16384)) // 4096 * 4096
    assert len(os.pread(fds[n], 16384, off)) == min(16384, sizes[n] - off)
    if i % 20 == 0:
        for fd in fds.values():
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    if i % 300 == 0:
        du = du_kib(cache)
        worst = max(worst, du)
        assert du <= cap_kib, "du %d KiB over the capacity %d KiB after %d reads" % (du, cap_kib, i)
print("largest du: %d KiB of %d KiB" % (worst, cap_kib))
assert worst > cap_kib // 2, "the workload did not fill the cache"
PY
  echo "evictions: $(metric "127.0.0.1:$dp" kelp_cache_evictions_total)"
  test "$(metric "127.0.0.1:$dp" kelp_cache_evictions_total)" -gt 0
  cd /
  do_unmount "$d"
  echo "after unmount: $(du -sk "$T/dcache" | cut -f1) KiB"
  test "$(du -sk "$T/dcache" | cut -f1)" -le $((cap_mb * 1024))
}
check du_within_capacity

test_two_default_mounts_each_get_a_cache() {
  local a=$T/da b=$T/db dirs from
  cd /
  mkdir -p "$T/tmp"
  from=$(($(wc -l <"$T/mount.log") + 1))
  TMPDIR=$T/tmp do_mount "$a"
  TMPDIR=$T/tmp do_mount "$b"
  # Both read the same files; each must fill a cache directory of its own.
  cat "$a"/small/* "$b"/small/* >/dev/null
  dirs=$(ls -d "$T"/tmp/kelp-cache-* | wc -l)
  echo "default cache dirs: $(ls -d "$T"/tmp/kelp-cache-* | tr '\n' ' ')"
  test "$dirs" = 2
  for d in "$T"/tmp/kelp-cache-*; do test "$(ls "$d/small" | wc -l)" -ge 40; done
  tail -n +"$from" "$T/mount.log" | grep "cache: "
  ! tail -n +"$from" "$T/mount.log" | grep -q "in use by another process"
  ! tail -n +"$from" "$T/mount.log" | grep -q "disk tiers OFF"
  do_unmount "$a"
  do_unmount "$b"
}
check two_default_mounts_each_get_a_cache

test_journaled_bytes_past_the_memory_bound_read_back() {
  local j=$T/j jp=$(free_port) loads
  cd /
  do_mount "$j" -cacheCapacityMB=64 -cacheDir="$T/jcache" -metricsPort="$jp" -journalMemoryMB=1
  # A 4 MiB file rewritten by 16 KiB writes, each fsynced (so journaled in its commit, about
  # 6 MiB in all against a 1 MiB bound), read back whole with the kernel's copy dropped.
  python3 - "$j/db" <<'PY'
import os, random, sys
random.seed(9)
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
model = bytearray(os.urandom(4 << 20))
os.pwrite(fd, model, 0)
os.fsync(fd)
for i in range(400):
    off = random.randrange(0, 256) * 16384
    block = os.urandom(16384)
    os.pwrite(fd, block, off)
    model[off:off + 16384] = block
    os.fsync(fd)
    if i % 50 == 49:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        got = os.pread(fd, len(model), 0)
        assert got == bytes(model), "read back differs after %d writes" % (i + 1)
os.close(fd)
open(sys.argv[1] + ".sha", "w").write(__import__("hashlib").sha256(model).hexdigest())
PY
  # Past the bound the file let go of its journaled bytes and loaded them again to read.
  loads=$(metric "127.0.0.1:$jp" 'kelp_filer_client_calls_total{client="mount",method="GetChunks"}')
  echo "chunk list loads: $loads"
  test "$loads" -gt 0
  do_unmount "$j"
  # Another mount (no cache) reads what the filer has: the same bytes.
  do_mount "$j" -cacheCapacityMB=0
  expect "sha256 through a new mount" "$(sha256sum <"$j/db" | cut -d' ' -f1)" "$(cat "$j/db.sha")"
  rm -f "$j/db" "$j/db.sha"
  do_unmount "$j"
}
check journaled_bytes_past_the_memory_bound_read_back

test_local_reads_of_a_stream() {
  local l=$T/l lp lu flags sum g0
  lp=$(free_port)
  lu="127.0.0.1:$lp"
  flags=(-cacheCapacityMB=64 -cacheDir="$T/lcache" -metricsPort="$lp")  # -readAheadMB: 4, a chunk
  do_mount "$l" "${flags[@]}"
  sum=$(head -c $((12 << 20)) /dev/urandom | tee "$l/stream.bin" | sha256sum | cut -d' ' -f1)
  echo "written: $(metric "$lu" kelp_mount_cache_local_skips_total) chunks left out of the cache," \
    "$(metric "$lu" 'kelp_cache_inserts_total{tier="large"}') large-tier inserts"
  test "$(metric "$lu" kelp_mount_cache_local_skips_total)" -ge 3
  expect "large-tier inserts after the write" "$(metric "$lu" 'kelp_cache_inserts_total{tier="large"}')" 0
  do_unmount "$l"
  do_mount "$l" "${flags[@]}"  # nothing of the file left in the kernel's page cache
  g0=$(volume_reads "$V")
  expect "sha256 read back" "$(sha256sum <"$l/stream.bin" | cut -d' ' -f1)" "$sum"
  echo "read: $(metric "$lu" kelp_mount_blob_local_reads_total) local reads," \
    "$(($(volume_reads "$V") - g0)) bytes over HTTP"
  test "$(metric "$lu" kelp_mount_blob_local_reads_total)" -ge 3
  # Only the first reads, before the reader counts as a stream (the kernel sends several at
  # once), are ranged reads over HTTP, whose blocks go into the cache as every random read's
  # do: a quarter of the file at most (about 1 MiB in practice).
  test "$(($(volume_reads "$V") - g0))" -le $((3 << 20))
  test "$(metric "$lu" 'kelp_cache_inserts_total{tier="large"}')" -le 12
  expect "local read fallbacks" "$(metric "$lu" kelp_mount_blob_local_read_fallbacks_total)" 0
  do_unmount "$l"
  do_mount "$l" "${flags[@]}" -localReads=false
  g0=$(volume_reads "$V")
  expect "sha256 read over HTTP" "$(sha256sum <"$l/stream.bin" | cut -d' ' -f1)" "$sum"
  expect "local reads with -localReads=false" "$(metric "$lu" kelp_mount_blob_local_reads_total)" 0
  test "$(($(volume_reads "$V") - g0))" -ge $((12 << 20))
  rm -f "$l/stream.bin"
  do_unmount "$l"
}
check local_reads_of_a_stream

cd /
do_unmount "$C" || true
echo "# passed $PASSED, failed $FAILED"
[ "$FAILED" = 0 ]
