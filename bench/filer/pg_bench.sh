#!/usr/bin/env bash
# The PostgreSQL store beside RocksDB, same sitting (issue 15's performance section):
#  1. store_bench on each store: create/commit/lookup/getattr latency through FilerService, and
#     bytes per file (docs/scale.md);
#  2. ../shared/bench workloads c (shell ops on a 10,000-file tree) and d (create/stat/unlink
#     10,000 files) on a kelp mount, with `kelp server -store=rocksdb` and then -store=postgres;
#  3. meta_load (create + stat over HTTP) against one filer, then two filers on one PostgreSQL.
# PostgreSQL runs with its defaults (fsync on) on 127.0.0.1, started and stopped here.
#
#   STEPS="store workloads scaling"  SB_FILES=100000  CLIENTS=16  SECONDS_RUN=10
#   KELP  KB_DIR  KB_KEEP  SHARED_BENCH=../shared/bench
set -u
# shellcheck source=bench/lib/kelp_bench.sh
source "$(dirname "$0")/../lib/kelp_bench.sh"
STEPS=${STEPS:-"store workloads scaling"}
SB_FILES=${SB_FILES:-100000}
CLIENTS=${CLIENTS:-16}
SECONDS_RUN=${SECONDS_RUN:-10}
SHARED_BENCH=${SHARED_BENCH:-$KB_ROOT/../shared/bench}
BIN=$KB_ROOT/build/bench/filer

kb_log "$(kb_machine)"
kb_start_postgres
kb_log "postgres: $KB_PG_DSN"

if [[ " $STEPS " == *" store "* ]]; then
  for store in rocksdb postgres; do
    kb_log "store_bench $store, load $(kb_load)"
    pg0=$(kb_pg_cpu)
    TIMEFORMAT="store_bench process: %U s user, %S s system, %R s wall"
    time "$BIN/store_bench" -store=$store -store.dsn="$KB_PG_DSN" -store.keyspace=sb -dir="$KB_DIR/sb-rocks" \
      -files="$SB_FILES" -threads=4
    kb_log "load after: $(kb_load); postgres CPU during the run: $(awk -v a="$pg0" -v b="$(kb_pg_cpu)" 'BEGIN { print b - a }') s"
  done
fi

if [[ " $STEPS " == *" workloads "* ]]; then
  export WORKLOADS="c d"
  export RESULTS_DIR=$KB_DIR/results
  for store in rocksdb postgres; do
    flags=()
    [ $store = postgres ] && flags=(-store=postgres -store.dsn="$KB_PG_DSN" -store.keyspace=wl)
    kb_start_server "${flags[@]}"
    kb_mount "$KB_DIR/mnt-$store" -cacheDir="$KB_DIR/cache-$store"
    pg0=$(kb_pg_cpu)
    kb_log "workloads c d on $store, load $(kb_load)"
    FS_PIDS="$KB_SERVER_PID ${KB_MOUNT_PID[$KB_DIR/mnt-$store]}" \
      "$SHARED_BENCH/run-workloads.sh" "$KB_DIR/mnt-$store" "kelp-$store" >/dev/null
    kb_log "load after: $(kb_load); postgres CPU during the run: $(awk -v a="$pg0" -v b="$(kb_pg_cpu)" 'BEGIN { print b - a }') s"
    cat "$RESULTS_DIR/kelp-$store.txt"
    kb_unmount "$KB_DIR/mnt-$store"
    kb_stop_server
  done
  [ "$KB_KEEP" = 1 ] || cp -r "$RESULTS_DIR" "/var/tmp/kelp-pg-bench-results-$$" && kb_log "results kept in /var/tmp/kelp-pg-bench-results-$$"
fi

if [[ " $STEPS " == *" scaling "* ]]; then
  start_filer() {  # start_filer N PORT: a filer on the shared store; pid in FILER_PID[N]
    mkdir -p "$KB_DIR/filer$1"
    "$KELP" filer -dir="$KB_DIR/filer$1" -port="$2" -store=postgres -store.dsn="$KB_PG_DSN" -store.keyspace=scale \
      -store.connections=32 >>"$KB_DIR/filer$1.log" 2>&1 &
    KB_PIDS+=("$!")
    FILER_PID[$1]=$!
    for ((i = 0; i < 100; i++)); do curl -fsS "http://127.0.0.1:$2/status" >/dev/null 2>&1 && return 0; sleep 0.1; done
    kb_die "filer $1 did not start"
  }
  declare -A FILER_PID
  p1=$(kb_free_port)
  p2=$(kb_free_port)
  start_filer 1 "$p1"
  kb_log "meta_load, one filer, $CLIENTS clients, load $(kb_load)"
  "$BIN/meta_load" -filers=127.0.0.1:$p1 -clients="$CLIENTS" -seconds="$SECONDS_RUN" -prefix=/one
  kb_log "load after: $(kb_load)"
  start_filer 2 "$p2"
  kb_log "meta_load, two filers, $CLIENTS clients, load $(kb_load)"
  "$BIN/meta_load" -filers=127.0.0.1:$p1,127.0.0.1:$p2 -clients="$CLIENTS" -seconds="$SECONDS_RUN" -prefix=/two
  kb_log "load after: $(kb_load)"
fi
