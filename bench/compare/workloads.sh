#!/usr/bin/env bash
# bench/compare/workloads.sh TARGET_DIR LABEL: the workloads of bench/compare.sh on any
# mounted directory (modelled on ../shared/bench/run-workloads.sh, plus workload f).
#   RESULTS_DIR/LABEL.txt  one line per metric: "LABEL metric value unit" (NA = step failed)
#   RESULTS_DIR/LABEL/     raw logs (sysbench, fio JSON, dd, ab, timings, env)
#
#  a  sysbench fileio: prepare SB_SIZE, rndrw SB_TIME s with 1 and 16 threads, cleanup
#  b  fio (psync, direct=0): seq write FIO_SIZE bs=1M (+end fsync), seq read back,
#     randread 4k FIO_JOBS jobs FIO_TIME s, randwrite 4k FIO_JOBS jobs FIO_TIME s (+end fsync)
#  c  shell ops on a NFILES-file tree (1-4 KiB files, NDIRS dirs): untar, ls -lR, du -s,
#     cp -r, find|wc -l, rm -rf; dd DD_MB MiB write conv=fsync and read back
#  d  metadata: create / stat / unlink META_N empty files in one directory
#  e  fio 4k sequential writes with an fsync after each, SYNC_TIME s (write+fsync pairs/s)
#  f  nginx serving a 389 KiB and a 5.6 MiB file from the target, `ab -k -c AB_C` for
#     AB_TIME s each (the MooseFS seed's web-serving test)
#
# Kernel caches are dropped (sync; echo 3 > drop_caches) before every read-type step.
# FS_PIDS="pid ...": the filesystem's processes; their CPU seconds per workload are cpu.<w>.
# Tunables: WORKLOADS="a b c d e f" SB_SIZE=1G SB_TIME=30 SB_THREADS="1 16" FIO_SIZE=1G
#   FIO_TIME=20 FIO_JOBS=4 NFILES=10000 NDIRS=100 META_N=10000 DD_MB=1024 SYNC_TIME=10
#   AB_TIME=10 AB_C=16 STEP_TIMEOUT=900 DROP_CACHES=auto|0|1
#   BENCH_CACHE=/var/tmp/kelp-compare-cache  RESULTS_DIR (required)
#   PROGRESS_PREFIX (put before each progress line, e.g. "[3/7 moosefs] ")
set -u
export LC_ALL=C

if [ $# -ne 2 ]; then
    echo "usage: $0 TARGET_DIR LABEL" >&2
    exit 2
fi
TARGET=$(cd "$1" && pwd) || { echo "no such dir: $1" >&2; exit 2; }
LABEL=$2
case "$LABEL" in *[!A-Za-z0-9._-]*|'') echo "LABEL must match [A-Za-z0-9._-]+" >&2; exit 2;; esac

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
WORKLOADS=${WORKLOADS:-"a b c d e f"}
AB_TIME=${AB_TIME:-10}
AB_C=${AB_C:-16}
PROGRESS_PREFIX=${PROGRESS_PREFIX:-}
SYNC_TIME=${SYNC_TIME:-10}
SB_SIZE=${SB_SIZE:-1G}
SB_TIME=${SB_TIME:-30}
SB_THREADS=${SB_THREADS:-"1 16"}
FIO_SIZE=${FIO_SIZE:-1G}
FIO_TIME=${FIO_TIME:-20}
FIO_JOBS=${FIO_JOBS:-4}
NFILES=${NFILES:-10000}
NDIRS=${NDIRS:-100}
META_N=${META_N:-10000}
DD_MB=${DD_MB:-1024}
STEP_TIMEOUT=${STEP_TIMEOUT:-900}
DROP_CACHES=${DROP_CACHES:-auto}
BENCH_CACHE=${BENCH_CACHE:-/var/tmp/kelp-compare-cache}
KEEP_WORKDIR=${KEEP_WORKDIR:-0}
FS_PIDS=${FS_PIDS:-}
PY=$(command -v python3)

# tools: Debian packages (scripts/install-deps.sh installs them)
for tool in sysbench fio gcc nginx ab; do
    command -v "$tool" > /dev/null || echo "warning: $tool missing, its steps will read NA" >&2
done

RESDIR=${RESULTS_DIR:?set RESULTS_DIR}
RAW=$RESDIR/$LABEL
RES=$RESDIR/$LABEL.txt
WORK=$TARGET/.fsbench-$LABEL
mkdir -p "$RAW" "$BENCH_CACHE"
: > "$RES"
TIMELOG=$RAW/timings.log
: > "$TIMELOG"

log() { echo "[$(date +%T)] $PROGRESS_PREFIX$*" | tee -a "$RAW/run.log" >&2; }
emit() { echo "$LABEL $1 $2 $3" >> "$RES"; }
emit_lines() { while read -r m v u; do [ -n "$m" ] && [ "${m#\#}" = "$m" ] && emit "$m" "$v" "$u"; done; }

if [ "$DROP_CACHES" = auto ]; then
    if [ -w /proc/sys/vm/drop_caches ]; then DROP_CACHES=1; else DROP_CACHES=0; fi
fi
drop_caches() {
    [ "$DROP_CACHES" = 1 ] || return 0
    sync
    echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
}

# run_step NAME CMD...  -> runs under timeout, logs, returns rc; sets STEP_SECS
run_step() {
    local name=$1; shift
    local t0 t1 rc
    t0=$(date +%s.%N)
    timeout -k 10 "$STEP_TIMEOUT" "$@" > "$RAW/$name.out" 2> "$RAW/$name.err"
    rc=$?
    t1=$(date +%s.%N)
    STEP_SECS=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f", b-a}')
    echo "$name rc=$rc secs=$STEP_SECS" >> "$TIMELOG"
    if [ $rc -ne 0 ]; then log "step $name FAILED rc=$rc (see $RAW/$name.err)"; fi
    return $rc
}

# timed NAME METRIC CMD...  -> emits METRIC seconds (NA on failure)
timed() {
    local name=$1 metric=$2; shift 2
    if run_step "$name" "$@"; then emit "$metric" "$STEP_SECS" s; else emit "$metric" NA s; fi
}

# CPU seconds (user+sys) used so far by FS_PIDS and their threads
fs_cpu() {
    local p t=0 v
    for p in $FS_PIDS; do
        v=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | awk '{print $12+$13}')
        t=$((t + ${v:-0}))
    done
    awk -v t="$t" -v hz="$(getconf CLK_TCK)" 'BEGIN{printf "%.2f", t/hz}'
}
CPU_MARK=0
cpu_begin() { CPU_MARK=$(fs_cpu); }
cpu_end() {  # cpu_end WORKLOAD
    [ -n "$FS_PIDS" ] || return 0
    emit "cpu.$1" "$(awk -v a="$CPU_MARK" -v b="$(fs_cpu)" 'BEGIN{printf "%.2f", b-a}')" s
}

# ---------------------------------------------------------------- environment
{
    echo "label: $LABEL"
    echo "target: $TARGET"
    echo "date: $(date -Is)"
    echo "host: $(uname -a)"
    echo "cpus: $(nproc)  mem: $(free -m | awk '/^Mem:/{print $2" MiB"}')"
    echo "drop_caches: $DROP_CACHES"
    echo "fs_pids: $FS_PIDS"
    for p in $FS_PIDS; do echo "  $p: $(tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null)"; done
    echo "sysbench: $(sysbench --version 2>&1)  fio: $(fio --version 2>&1)"
    echo "params: WORKLOADS='$WORKLOADS' SB_SIZE=$SB_SIZE SB_TIME=$SB_TIME SB_THREADS='$SB_THREADS' FIO_SIZE=$FIO_SIZE FIO_TIME=$FIO_TIME FIO_JOBS=$FIO_JOBS NFILES=$NFILES NDIRS=$NDIRS META_N=$META_N DD_MB=$DD_MB SYNC_TIME=$SYNC_TIME AB_TIME=$AB_TIME AB_C=$AB_C"
    echo "--- df -T"; df -T "$TARGET"
    echo "--- findmnt"; findmnt -T "$TARGET" -o TARGET,SOURCE,FSTYPE,OPTIONS
} > "$RAW/env.txt" 2>&1
log "label=$LABEL target=$TARGET ($(findmnt -n -T "$TARGET" -o FSTYPE)) workloads='$WORKLOADS'"

rm -rf "$WORK" 2>/dev/null
mkdir -p "$WORK" || { log "cannot create $WORK"; exit 1; }
START=$(date +%s)

# ---------------------------------------------------------------- a: sysbench
if [[ " $WORKLOADS " == *" a "* ]]; then
    log "a: sysbench fileio $SB_SIZE"
    cpu_begin
    mkdir -p "$WORK/sysbench"
    pushd "$WORK/sysbench" > /dev/null
    if run_step sysbench-prepare sysbench fileio --file-total-size="$SB_SIZE" prepare; then
        "$PY" "$BENCH_DIR/parse.py" sysbench-prepare "$RAW/sysbench-prepare.out" sysbench.prepare | emit_lines
        for t in $SB_THREADS; do
            log "a: sysbench rndrw threads=$t ${SB_TIME}s"
            run_step "sysbench-t$t" sysbench fileio --file-total-size="$SB_SIZE" --file-test-mode=rndrw \
                --time="$SB_TIME" --max-requests=0 --threads="$t" run
            "$PY" "$BENCH_DIR/parse.py" sysbench-run "$RAW/sysbench-t$t.out" "sysbench.t$t" | emit_lines
        done
    else
        emit sysbench.prepare.MiBps NA MiB/s
    fi
    run_step sysbench-cleanup sysbench fileio --file-total-size="$SB_SIZE" cleanup
    popd > /dev/null
    rm -rf "$WORK/sysbench"
    cpu_end sysbench
fi

# ---------------------------------------------------------------- b: fio
if [[ " $WORKLOADS " == *" b "* ]]; then
    mkdir -p "$WORK/fio"
    cpu_begin
    FIO_COMMON=(--directory="$WORK/fio" --filename=fio.dat --size="$FIO_SIZE" --ioengine=psync
                --direct=0 --fallocate=none --output-format=json)
    fio_step() {  # NAME RW(read|write) ARGS...
        local name=$1 rw=$2; shift 2
        run_step "fio-$name" fio --name="$name" "${FIO_COMMON[@]}" --output="$RAW/fio-$name.json" "$@"
        "$PY" "$BENCH_DIR/parse.py" fio "$RAW/fio-$name.json" "fio.$name" "$rw" | emit_lines
    }
    log "b: fio seqwrite 1M $FIO_SIZE"
    fio_step seqwrite_1M write --rw=write --bs=1M --numjobs=1 --end_fsync=1
    # fio's own bw may leave out the closing fsync; also report size / wall time of the step
    # (wall includes fio start-up, ~0.1 s).
    emit fio.seqwrite_1M.wall_MiBps "$(awk -v s="$FIO_SIZE" -v t="$STEP_SECS" 'BEGIN{
        m=1; if (s ~ /[Gg]$/) m=1024; else if (s ~ /[Mm]$/) m=1; else if (s ~ /[Kk]$/) m=1/1024;
        else m=1/1048576; sub(/[GgMmKk]$/, "", s); printf "%.1f", s*m/t}')" MiB/s
    log "b: fio seqread 1M"
    drop_caches
    fio_step seqread_1M read --rw=read --bs=1M --numjobs=1
    log "b: fio randread 4k ${FIO_JOBS} jobs ${FIO_TIME}s"
    drop_caches
    fio_step "randread_4k_j$FIO_JOBS" read --rw=randread --bs=4k --numjobs="$FIO_JOBS" --iodepth=1 \
        --time_based --runtime="$FIO_TIME" --group_reporting
    log "b: fio randwrite 4k ${FIO_JOBS} jobs ${FIO_TIME}s"
    fio_step "randwrite_4k_j$FIO_JOBS" write --rw=randwrite --bs=4k --numjobs="$FIO_JOBS" --iodepth=1 \
        --time_based --runtime="$FIO_TIME" --group_reporting --end_fsync=1
    rm -rf "$WORK/fio"
    cpu_end fio
fi

# ---------------------------------------------------------------- c: shell ops + dd
if [[ " $WORKLOADS " == *" c "* ]]; then
    TAR=$BENCH_CACHE/tree-$NFILES-$NDIRS.tar
    [ -s "$TAR" ] || "$PY" "$BENCH_DIR/mktree.py" "$TAR" "$NFILES" "$NDIRS"
    S=$WORK/shell
    mkdir -p "$S"
    cpu_begin
    log "c: untar $NFILES files"
    timed shell-untar shell.untar tar -xf "$TAR" -C "$S"
    log "c: ls -lR / du -s / cp -r / find / rm -rf"
    drop_caches
    timed shell-ls_lR shell.ls_lR bash -c "cd '$S' && ls -lR tree > /dev/null"
    drop_caches
    timed shell-du_s shell.du_s bash -c "cd '$S' && du -s tree"
    drop_caches
    timed shell-cp_r shell.cp_r bash -c "cd '$S' && cp -r tree tree2"
    drop_caches
    timed shell-find shell.find bash -c "cd '$S' && find . | wc -l"
    emit shell.find.entries "$(tr -d ' \n' < "$RAW/shell-find.out" 2>/dev/null || echo NA)" count
    drop_caches
    timed shell-rm_rf shell.rm_rf bash -c "cd '$S' && rm -rf tree tree2"
    log "c: dd ${DD_MB} MiB write conv=fsync, read back"
    mkdir -p "$WORK/dd"
    run_step dd-write dd if=/dev/zero of="$WORK/dd/f" bs=1M count="$DD_MB" conv=fsync
    "$PY" "$BENCH_DIR/parse.py" dd "$RAW/dd-write.err" dd.write_fsync | emit_lines
    drop_caches
    run_step dd-read dd if="$WORK/dd/f" of=/dev/null bs=1M
    "$PY" "$BENCH_DIR/parse.py" dd "$RAW/dd-read.err" dd.read | emit_lines
    rm -rf "$WORK/dd" "$S"
    cpu_end shell_dd
fi

# ---------------------------------------------------------------- d: metadata rate
if [[ " $WORKLOADS " == *" d "* ]]; then
    METAOPS=$BENCH_CACHE/metaops
    if [ ! -x "$METAOPS" ] || [ "$BENCH_DIR/metaops.c" -nt "$METAOPS" ]; then
        gcc -O2 -o "$METAOPS" "$BENCH_DIR/metaops.c" || log "gcc failed"
    fi
    M=$WORK/meta
    mkdir -p "$M"
    cpu_begin
    for phase in create stat unlink; do
        log "d: $phase $META_N files"
        [ "$phase" = create ] || drop_caches
        if run_step "meta-$phase" "$METAOPS" "$phase" "$M" "$META_N"; then
            emit "meta.$phase" "$(awk '{print $4}' "$RAW/meta-$phase.out")" ops/s
        else
            emit "meta.$phase" NA ops/s
        fi
    done
    rm -rf "$M"
    cpu_end meta
fi

# ---------------------------------------------------------------- e: fsync probe
if [[ " $WORKLOADS " == *" e "* ]]; then
    log "e: fio 4k write + fsync each, ${SYNC_TIME}s"
    mkdir -p "$WORK/sync"
    cpu_begin
    run_step fio-syncwrite_4k fio --name=syncwrite_4k --directory="$WORK/sync" --filename=sync.dat \
        --size=256M --ioengine=psync --direct=0 --fallocate=none --rw=write --bs=4k --fsync=1 \
        --time_based --runtime="$SYNC_TIME" --output-format=json --output="$RAW/fio-syncwrite_4k.json"
    "$PY" "$BENCH_DIR/parse.py" fio "$RAW/fio-syncwrite_4k.json" fio.syncwrite_4k write | emit_lines
    "$PY" "$BENCH_DIR/parse.py" fio-sync "$RAW/fio-syncwrite_4k.json" fio.syncwrite_4k | emit_lines
    rm -rf "$WORK/sync"
    cpu_end sync
fi

# ---------------------------------------------------------------- f: nginx + ab
if [[ " $WORKLOADS " == *" f "* ]]; then
    W=$WORK/www
    mkdir -p "$W"
    head -c $((389 * 1024)) /dev/urandom > "$W/small.bin"
    head -c $((5734 * 1024)) /dev/urandom > "$W/large.bin"
    NG=$RAW/nginx
    mkdir -p "$NG/tmp"
    NPORT=$("$PY" "$BENCH_DIR/../../tests/mount/free_port.py")
    cat > "$NG/nginx.conf" <<EOF
daemon off;
master_process off;
worker_processes 1;
pid $NG/nginx.pid;
error_log $NG/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $NG/tmp;
    proxy_temp_path $NG/tmp;
    fastcgi_temp_path $NG/tmp;
    uwsgi_temp_path $NG/tmp;
    scgi_temp_path $NG/tmp;
    sendfile on;
    open_file_cache off;
    keepalive_requests 100000;
    server {
        listen 127.0.0.1:$NPORT;
        root $W;
    }
}
EOF
    nginx -c "$NG/nginx.conf" -p "$NG" > "$NG/nginx.out" 2>&1 &
    NGINX_PID=$!
    for _ in $(seq 100); do curl -fsS -o /dev/null "http://127.0.0.1:$NPORT/small.bin" 2>/dev/null && break; sleep 0.05; done
    cpu_begin
    for f in small large; do
        log "f: nginx + ab -k -c $AB_C ${AB_TIME}s, $f.bin"
        drop_caches
        run_step "ab-$f" ab -k -q -c "$AB_C" -t "$AB_TIME" -n 10000000 "http://127.0.0.1:$NPORT/$f.bin"
        "$PY" "$BENCH_DIR/parse.py" ab "$RAW/ab-$f.out" "ab.$f" | emit_lines
    done
    cpu_end ab
    kill -TERM "$NGINX_PID" 2>/dev/null
    wait "$NGINX_PID" 2>/dev/null
    rm -rf "$W"
fi

[ "$KEEP_WORKDIR" = 1 ] || rm -rf "$WORK"
emit total.wall $(( $(date +%s) - START )) s
log "done: $RES ($(wc -l < "$RES") metrics, $(( $(date +%s) - START )) s)"
