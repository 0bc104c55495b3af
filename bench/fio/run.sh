#!/usr/bin/env bash
# fio 4k random reads over one 1 GiB file: a kelp mount with its read cache, cold then warm,
# beside bindfs of a local directory (the same fio job, same file size), in one run (issue 5).
#   cold: kelp: a fresh mount with an empty -cacheDir (the file was written through a mount
#         without cache), the kernel's caches dropped; bindfs: the kernel's caches dropped.
#   warm: after one sequential read of the whole file (which fills kelp's cache), no drop;
#         fio's invalidate=1 (its default) drops the file's pages in the FUSE mount, so every
#         read goes through the FUSE daemon, which reads kelp's cache files or bindfs's file
#         from the page cache.
# Job: psync, bs=4k, NUMJOBS jobs x iodepth 1 on the same file, RUNTIME seconds, as workload b
# of ../shared/bench. Prints one line per run: IOPS, MiB/s, mean and p99 latency, load.
#
#   SIZE=1G  RUNTIME=20  NUMJOBS=4  CACHE_MB=2000  MOUNT_FLAGS="" (extra kelp mount flags)
#   KELP  KB_DIR  KB_KEEP (see bench/lib/kelp_bench.sh)
set -u
# shellcheck source=bench/lib/kelp_bench.sh
source "$(dirname "$0")/../lib/kelp_bench.sh"
SIZE=${SIZE:-1G}
RUNTIME=${RUNTIME:-20}
NUMJOBS=${NUMJOBS:-4}
CACHE_MB=${CACHE_MB:-2000}
MOUNT_FLAGS=${MOUNT_FLAGS:-}
command -v fio >/dev/null || kb_die "fio is not installed (apt-get install fio)"

# randread LABEL FILE: one fio run, one summary line.
randread() {
  local label=$1 file=$2 load out=$KB_DIR/fio-$1.json
  load=$(kb_load)
  fio --name=randread --filename="$file" --rw=randread --bs=4k --size="$SIZE" --ioengine=psync \
    --numjobs="$NUMJOBS" --iodepth=1 --time_based --runtime="$RUNTIME" --group_reporting \
    --output-format=json >"$out" 2>"$KB_DIR/fio-$label.err" || kb_die "fio $label failed: $(tail -3 "$KB_DIR/fio-$label.err")"
  python3 - "$out" "$label" "$load" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]["read"]
clat = j["clat_ns"]
p99 = clat.get("percentile", {}).get("99.000000", float("nan")) / 1e3
print("%-14s %9.0f %8.1f %9.1f %9.1f %5s" % (sys.argv[2], j["iops"], j["bw"] / 1024, clat["mean"] / 1e3, p99, sys.argv[3]))
PY
}

kb_log "$(kb_machine)"
kb_start_server
# The file, written through a mount without cache, so the cold run starts from nothing.
kb_mount "$KB_DIR/w" -cacheCapacityMB=0
fio --name=fill --filename="$KB_DIR/w/f" --rw=write --bs=1M --size="$SIZE" --end_fsync=1 \
  --output="$KB_DIR/fill.log" >/dev/null || kb_die "writing the file failed"
kb_unmount "$KB_DIR/w"
# The same size on the local disk, for bindfs.
mkdir -p "$KB_DIR/local"
fio --name=fill --filename="$KB_DIR/local/f" --rw=write --bs=1M --size="$SIZE" --end_fsync=1 \
  --output="$KB_DIR/fill-local.log" >/dev/null || kb_die "writing the local file failed"
kb_bindfs "$KB_DIR/local" "$KB_DIR/bindfs"

mp=$(kb_free_port)
# shellcheck disable=SC2086
kb_mount "$KB_DIR/k" -cacheCapacityMB="$CACHE_MB" -cacheDir="$KB_DIR/cache" -metricsPort="$mp" $MOUNT_FLAGS
printf '%-14s %9s %8s %9s %9s %5s\n' run IOPS MiB/s "mean_us" "p99_us" load
kb_drop_caches
randread kelp-cold "$KB_DIR/k/f"
kb_drop_caches
randread bindfs-cold "$KB_DIR/bindfs/f"
cat "$KB_DIR/k/f" >/dev/null
cat "$KB_DIR/bindfs/f" >/dev/null
h0=$(kb_metric "127.0.0.1:$mp" kelp_cache_hits_total)
m0=$(kb_metric "127.0.0.1:$mp" kelp_cache_misses_total)
randread kelp-warm "$KB_DIR/k/f"
h=$(($(kb_metric "127.0.0.1:$mp" kelp_cache_hits_total) - h0))
m=$(($(kb_metric "127.0.0.1:$mp" kelp_cache_misses_total) - m0))
randread bindfs-warm "$KB_DIR/bindfs/f"
kb_log "kelp warm run: $h cache hits, $m misses"
