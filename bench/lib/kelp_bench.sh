# Sourced by the mount benchmarks (bench/sysbench, bench/fio, bench/mount): starts `kelp server`
# (filer + volume server in one process) and `kelp mount`s on free loopback ports, with every
# file under $KB_DIR (on the local disk, not tmpfs), and tears all of it down on exit: mounts
# first (SIGTERM, so the mount flushes and logs its cache summary), then the processes this
# script started, by pid. Nothing else is touched.
#
#   KELP     the kelp binary          (default: build/cmd/kelp of this checkout)
#   KB_DIR   working directory        (default: /var/tmp/kelp-bench-$$; removed at exit
#                                      unless KB_KEEP=1)
set -u
KB_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
KELP=${KELP:-$KB_ROOT/build/cmd/kelp}
KB_DIR=${KB_DIR:-/var/tmp/kelp-bench-$$}
KB_KEEP=${KB_KEEP:-0}
mkdir -p "$KB_DIR"
KB_PIDS=()      # processes to stop at exit
KB_MOUNTS=()    # mount points to undo at exit
declare -A KB_MOUNT_PID

kb_log() { echo "[$(date +%T)] $*" >&2; }
kb_die() { kb_log "ERROR: $*"; exit 1; }
kb_load() { cut -d' ' -f1 /proc/loadavg; }
kb_drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }

kb_free_port() { python3 "$KB_ROOT/tests/mount/free_port.py"; }  # p with p and p+10000 free

kb_teardown() {
  local m p i
  for m in "${KB_MOUNTS[@]}"; do
    mountpoint -q "$m" 2>/dev/null || continue
    p=${KB_MOUNT_PID[$m]:-}
    if [ -n "$p" ] && kill -0 "$p" 2>/dev/null; then
      kill -TERM "$p"
      for ((i = 0; i < 300; i++)); do mountpoint -q "$m" || break; sleep 0.1; done
    fi
    mountpoint -q "$m" && { fusermount3 -uz "$m" 2>/dev/null || umount -l "$m"; }
  done
  for p in "${KB_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${KB_PIDS[@]}"; do
    for ((i = 0; i < 300; i++)); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null
  done
  [ "$KB_KEEP" = 1 ] || rm -rf "$KB_DIR"
}
trap kb_teardown EXIT
trap 'exit 130' INT TERM

# kb_start_server [flags...]: a new `kelp server` with its data in $KB_DIR/server-N; sets KB_FILER (host:port),
# KB_VOLUME (host:port) and KB_SERVER_PID.
KB_SERVERS=0
kb_start_server() {
  [ -x "$KELP" ] || kb_die "no kelp binary at $KELP (build first, or set KELP)"
  KB_SERVERS=$((KB_SERVERS + 1))
  local fp vp i data=$KB_DIR/server-$KB_SERVERS
  mkdir -p "$data"
  fp=$(kb_free_port)
  vp=$(kb_free_port)
  "$KELP" server -dir="$data" -filer.port="$fp" -volume.port="$vp" "$@" \
    >>"$KB_DIR/server.log" 2>&1 &
  KB_SERVER_PID=$!
  KB_PIDS+=("$KB_SERVER_PID")
  KB_FILER=127.0.0.1:$fp
  KB_VOLUME=127.0.0.1:$vp
  for ((i = 0; i < 100; i++)); do
    curl -fsS "http://$KB_VOLUME/status" >/dev/null 2>&1 && curl -fsS "http://$KB_FILER/status" >/dev/null 2>&1 && break
    sleep 0.1
  done
  curl -fsS "http://$KB_FILER/status" >/dev/null || kb_die "kelp server did not start (see $KB_DIR/server.log)"
  sleep 1.5  # the volume server's first heartbeat
}

# kb_start_postgres: a PostgreSQL 15 of its own (initdb in $KB_DIR/pg, as the postgres user
# when root; PostgreSQL's defaults, fsync on; 127.0.0.1 on a free port), stopped at exit like
# everything else. Sets KB_PG_DSN and KB_PG_PID.
kb_start_postgres() {
  local bin=${KB_PG_BIN:-/usr/lib/postgresql/15/bin} port i as=()
  [ -x "$bin/initdb" ] || kb_die "no PostgreSQL at $bin (apt-get install postgresql-15)"
  mkdir -p "$KB_DIR/pg"
  if [ "$(id -u)" = 0 ]; then
    chown postgres "$KB_DIR/pg"
    as=(runuser -u postgres --)
  fi
  "${as[@]}" "$bin/initdb" -D "$KB_DIR/pg/data" -A trust -U postgres -E UTF8 --locale=C >"$KB_DIR/pg.log" 2>&1 ||
    kb_die "initdb failed (see $KB_DIR/pg.log)"
  port=$(kb_free_port)
  "${as[@]}" "$bin/postgres" -D "$KB_DIR/pg/data" -k "$KB_DIR/pg" -c listen_addresses=127.0.0.1 -p "$port" \
    -c max_connections=200 -c shared_buffers=256MB >>"$KB_DIR/pg.log" 2>&1 &
  KB_PIDS+=("$!")
  KB_PG_DSN="host=127.0.0.1 port=$port user=postgres dbname=postgres"
  for ((i = 0; i < 100; i++)); do
    if "$bin/pg_isready" -q -h 127.0.0.1 -p "$port"; then
      KB_PG_PID=$(head -1 "$KB_DIR/pg/data/postmaster.pid")  # the postmaster (runuser is its parent)
      KB_PIDS+=("$KB_PG_PID")
      return 0
    fi
    sleep 0.1
  done
  kb_die "postgres did not start (see $KB_DIR/pg.log)"
}

# kb_pg_cpu: CPU seconds (user+sys) of the postgres started by kb_start_postgres and every
# backend it forked, so far: live ones, and those that exited (the postmaster reaped them, so
# they count in its cutime/cstime).
kb_pg_cpu() {
  local p t hz
  hz=$(getconf CLK_TCK)
  t=$(awk '{ print $16 + $17 }' "/proc/$KB_PG_PID/stat")
  for p in "$KB_PG_PID" $(pgrep -P "$KB_PG_PID"); do
    [ -r "/proc/$p/stat" ] || continue
    t=$((t + $(awk '{ print $14 + $15 }' "/proc/$p/stat")))
  done
  awk -v t="$t" -v hz="$hz" 'BEGIN { printf "%.1f\n", t / hz }'
}

# kb_stop_server: stops the server kb_start_server started last (unmount its mounts first).
kb_stop_server() {
  local i keep=()
  kill -TERM "$KB_SERVER_PID" 2>/dev/null
  for ((i = 0; i < 300; i++)); do kill -0 "$KB_SERVER_PID" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$KB_SERVER_PID" 2>/dev/null
  for i in "${KB_PIDS[@]}"; do [ "$i" = "$KB_SERVER_PID" ] || keep+=("$i"); done
  KB_PIDS=("${keep[@]}")
}

# kb_mount DIR [flags...]: mounts the server at DIR; the pid is in KB_MOUNT_PID[DIR].
kb_mount() {
  local dir=$1 i
  shift
  mkdir -p "$dir"
  "$KELP" mount -dir="$dir" -filer="$KB_FILER" "$@" >>"$KB_DIR/mount.log" 2>&1 &
  KB_MOUNT_PID[$dir]=$!
  KB_PIDS+=("$!")
  KB_MOUNTS+=("$dir")
  for ((i = 0; i < 100; i++)); do mountpoint -q "$dir" && return 0; sleep 0.1; done
  tail -5 "$KB_DIR/mount.log" >&2
  kb_die "mount of $dir did not come up"
}

# kb_unmount DIR: SIGTERM to its mount (flush, cache index, summary line) and wait.
kb_unmount() {
  local dir=$1 p=${KB_MOUNT_PID[$1]} i
  kill -TERM "$p" 2>/dev/null
  for ((i = 0; i < 600; i++)); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  mountpoint -q "$dir" && fusermount3 -uz "$dir"
  local keep=() q
  for q in "${KB_PIDS[@]}"; do [ "$q" = "$p" ] || keep+=("$q"); done
  KB_PIDS=("${keep[@]}")
  return 0
}

# kb_bindfs SRC MNT: bindfs of the local directory SRC at MNT (as ../shared/bench's
# "bindfs" peer: defaults, single-threaded), undone at exit like kelp's mounts.
kb_bindfs() {
  local i
  command -v bindfs >/dev/null || kb_die "bindfs is not installed (apt-get install bindfs)"
  mkdir -p "$1" "$2"
  bindfs "$1" "$2" || kb_die "bindfs $1 $2 failed"
  KB_MOUNTS+=("$2")
  for ((i = 0; i < 50; i++)); do mountpoint -q "$2" && return 0; sleep 0.1; done
  kb_die "bindfs at $2 did not come up"
}

# kb_metric HOST:PORT NAME: sum of every sample of metric NAME (NAME may carry labels).
kb_metric() {
  curl -fsS "http://$1/metrics" | awk -v n="$2" '$1 == n || index($1, n "{") == 1 { s += $NF } END { printf "%.0f\n", s }'
}

# kb_rss_kib PID: resident set size in KiB.
kb_rss_kib() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status"; }

kb_machine() {
  echo "machine: $(nproc) vCPU ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(free -g | awk '/Mem:/ {print $2}') GiB RAM, $(. /etc/os-release; echo "$PRETTY_NAME"), kernel $(uname -r), $(findmnt -no FSTYPE,SOURCE -T "$KB_DIR" | tr -s ' ')"
}
