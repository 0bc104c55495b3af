#!/usr/bin/env bash
# Interleaved A/B of kelp mount flag sets, for deciding a default: ROUNDS rounds, each running
# every flag set in turn on a fresh `kelp server` + `kelp mount -chunkSizeLimitMB=4
# -cacheCapacityMB=1000 FLAGS`, so the machine's drift (load, the host's steal time) hits every
# set alike. Workloads (STEPS, each in its own directory of the mount):
#   seqwrite   fio 1 MiB sequential writes of FIO_SIZE, end fsync (as workload b): MiB/s
#   pairs      fio 4 KiB sequential writes with an fsync after each, PAIRS_TIME s (as workload e):
#              write+fsync pairs/s
#   randwrite  fio 4 KiB random writes, FIO_JOBS jobs on one prefilled FIO_SIZE file (as
#              ../shared/bench workload b: psync, end fsync), FIO_TIME s: IOPS
#   sb1, sb16  sysbench fileio rndrw, SB_SIZE, 1 and 16 threads, SB_TIME s: reads/s
#   create     bench/compare/metaops create of META_N empty files in one directory: ops/s
# One line per step and flag set: the figure, the load average before it, and the host's steal
# time during it (ticks of /proc/stat, all vCPUs; a busy host shows here first).
#
#   SETS="" (flag sets, '|'-separated; an empty set = the defaults), e.g.
#        SETS="|-cacheWriteThrough=false" for the defaults against writes not put in the cache
#   ROUNDS=2  STEPS="randwrite sb1 sb16 create"  FIO_SIZE=1G FIO_TIME=20 FIO_JOBS=4
#   SB_SIZE=1G SB_TIME=20  META_N=5000  PAIRS_TIME=10  KELP  KB_DIR  KB_KEEP (see bench/lib/kelp_bench.sh)
set -u
# shellcheck source=bench/lib/kelp_bench.sh
source "$(dirname "$0")/../lib/kelp_bench.sh"
SETS=${SETS-}
ROUNDS=${ROUNDS:-2}
STEPS=${STEPS:-"randwrite sb1 sb16 create"}
FIO_SIZE=${FIO_SIZE:-1G}
FIO_TIME=${FIO_TIME:-20}
FIO_JOBS=${FIO_JOBS:-4}
SB_SIZE=${SB_SIZE:-1G}
SB_TIME=${SB_TIME:-20}
META_N=${META_N:-5000}
PAIRS_TIME=${PAIRS_TIME:-10}
for tool in fio sysbench gcc; do command -v "$tool" >/dev/null || kb_die "$tool is not installed"; done
METAOPS=$KB_DIR/metaops
gcc -O2 -o "$METAOPS" "$KB_ROOT/bench/compare/metaops.c" || kb_die "gcc metaops.c failed"

steal() { awk '/^cpu / { print $9 }' /proc/stat; }

# fio_figure RW FIELD: FIELD ("iops" or "bw", KiB/s) of RW in the last fio run's JSON.
fio_figure() {
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["jobs"][0][sys.argv[2]][sys.argv[3]])' \
    "$KB_DIR/fio.json" "$1" "$2"
}

# step NAME DIR: runs one workload in DIR, prints its figure.
step() {
  local name=$1 dir=$2 t
  mkdir -p "$dir" && cd "$dir" || return 1
  case "$name" in
    seqwrite)
      fio --name=seqwrite --filename=seq.dat --size="$FIO_SIZE" --bs=1M --rw=write --ioengine=psync \
        --end_fsync=1 --output-format=json --output="$KB_DIR/fio.json" >/dev/null || return 1
      fio_figure write bw | awk '{ printf "%.0f\n", $1 / 1024 }' ;;
    pairs)
      fio --name=pairs --filename=sync.dat --size=256M --bs=4k --rw=write --ioengine=psync --fallocate=none \
        --fsync=1 --time_based --runtime="$PAIRS_TIME" --output-format=json --output="$KB_DIR/fio.json" \
        >/dev/null || return 1
      fio_figure write iops | awk '{ printf "%.0f\n", $1 }' ;;
    randwrite)
      fio --name=prefill --filename=fio.dat --size="$FIO_SIZE" --bs=1M --rw=write --ioengine=psync \
        --end_fsync=1 >/dev/null || return 1
      fio --name=randwrite --filename=fio.dat --size="$FIO_SIZE" --bs=4k --rw=randwrite --ioengine=psync \
        --numjobs="$FIO_JOBS" --time_based --runtime="$FIO_TIME" --end_fsync=1 --group_reporting \
        --output-format=json --output="$KB_DIR/fio.json" >/dev/null || return 1
      fio_figure write iops | awk '{ printf "%.0f\n", $1 }' ;;
    sb1 | sb16)
      t=${name#sb}
      sysbench fileio --file-total-size="$SB_SIZE" prepare >/dev/null || return 1
      kb_drop_caches
      sysbench fileio --file-total-size="$SB_SIZE" --file-test-mode=rndrw --threads="$t" --time="$SB_TIME" \
        run >"$KB_DIR/sb.out" || return 1
      sysbench fileio --file-total-size="$SB_SIZE" cleanup >/dev/null
      awk '/reads\/s:/ { print $2 }' "$KB_DIR/sb.out" ;;
    create)
      "$METAOPS" create . "$META_N" | awk '{ printf "%.0f\n", $4 }' ;;
    *) kb_die "unknown step $name" ;;
  esac
}

kb_log "$(kb_machine)"
printf '%-6s %-10s %-28s %10s %6s %7s\n' round step flags figure load steal
IFS='|' read -r -a sets <<<"$SETS"
[ ${#sets[@]} -gt 0 ] || sets=("")
for ((r = 1; r <= ROUNDS; r++)); do
  for s in "${sets[@]}"; do
    kb_start_server
    mnt=$KB_DIR/mnt
    # shellcheck disable=SC2086
    kb_mount "$mnt" -chunkSizeLimitMB=4 -cacheCapacityMB=1000 -cacheDir="$KB_DIR/cache" $s
    for st in $STEPS; do
      load=$(kb_load)
      s0=$(steal)
      fig=$(step "$st" "$mnt/$st") || fig=NA
      printf '%-6s %-10s %-28s %10s %6s %7s\n' "$r" "$st" "${s:-(defaults)}" "${fig:-NA}" "$load" \
        "$(($(steal) - s0))"
      cd "$KB_DIR" || kb_die "cd $KB_DIR"
    done
    kb_unmount "$mnt"
    kb_stop_server
    rm -rf "$KB_DIR/cache" "$KB_DIR/server-$KB_SERVERS"
  done
done
