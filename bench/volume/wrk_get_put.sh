#!/usr/bin/env bash
# Volume server GET/PUT of 1 KiB blobs under wrk, next to nginx on the same disk and loopback:
#   GET  volume /1,<fid>  vs  nginx static 1 KiB file
#   PUT  volume fresh fids vs  nginx WebDAV PUT of fresh 1 KiB files
# Usage: bench/volume/wrk_get_put.sh [BUILD_DIR]
#   env: DURATION=10s THREADS=2 CONNS=100 ROUNDS=3
# nginx and the volume server are measured alternately, ROUNDS times each, and the best round
# of each is reported: on a shared machine that is the least disturbed one.
# Needs wrk and nginx (apt-get install wrk nginx). Prints req/s and the ratios. Everything it
# starts is stopped by PID on exit; data goes to a temporary directory under BUILD_DIR.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
DURATION=${DURATION:-10s}
THREADS=${THREADS:-2}
CONNS=${CONNS:-100}
ROUNDS=${ROUNDS:-3}
KELP=$BUILD/cmd/kelp
TOOL=$BUILD/volume/volume_tool
for x in "$KELP" "$TOOL"; do [ -x "$x" ] || { echo "missing $x: build first" >&2; exit 1; }; done
command -v wrk >/dev/null || { echo "wrk not installed (apt-get install wrk)" >&2; exit 1; }
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$NGINX" ] || { echo "nginx not installed (apt-get install nginx)" >&2; exit 1; }

WORK=$(mktemp -d "$(cd "$BUILD" && pwd)/bench-volume.XXXXXX")
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
rps() { awk '/Requests\/sec/ {print int($2)}'; }
wait_http() { for _ in $(seq 100); do curl -fs -o /dev/null "$1" && return 0; sleep 0.05; done; echo "no answer from $1" >&2; exit 1; }

# --- volume server --------------------------------------------------------------------
VPORT=$(free_port)
while [ "$VPORT" -gt 55000 ]; do VPORT=$(free_port); done  # gRPC goes on port + 10000
"$KELP" volume -dir="$WORK/vol" -port="$VPORT" -filer= -logLevel=warn -vacuumIntervalSec=0 &
PIDS+=($!)
wait_http "http://127.0.0.1:$VPORT/status"
"$TOOL" allocate "127.0.0.1:$((VPORT + 10000))" 1
"$TOOL" fill "127.0.0.1:$VPORT" 1 1000 1024 >/dev/null
FID=1,0112345678

# --- nginx: a static 1 KiB file and a WebDAV PUT location, same disk ---------------------
NPORT=$(free_port)
mkdir -p "$WORK/nginx/www/dav" "$WORK/nginx/tmp" "$WORK/nginx/logs"
head -c 1024 /dev/urandom >"$WORK/nginx/www/blob"
cat >"$WORK/nginx/nginx.conf" <<CONF
user $(id -un) $(id -gn);
worker_processes auto;
daemon off;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/logs/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $WORK/nginx/tmp;
  proxy_temp_path $WORK/nginx/tmp;
  fastcgi_temp_path $WORK/nginx/tmp;
  uwsgi_temp_path $WORK/nginx/tmp;
  scgi_temp_path $WORK/nginx/tmp;
  server {
    listen 127.0.0.1:$NPORT;
    root $WORK/nginx/www;
    location /dav/ { dav_methods PUT; create_full_put_path on; client_body_buffer_size 16k; }
  }
}
CONF
"$NGINX" -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" &
PIDS+=($!)
wait_http "http://127.0.0.1:$NPORT/blob"

WRK=(wrk -t"$THREADS" -c"$CONNS" -d"$DURATION")
echo "wrk -t$THREADS -c$CONNS -d$DURATION, 1 KiB bodies, $(nproc) cores, best of $ROUNDS alternating rounds"
best() { local b=0; for x in "$@"; do [ "$x" -gt "$b" ] && b=$x; done; echo "$b"; }
# CPU time (clock ticks) of a process and its children's threads, and request counts: the
# server CPU spent per GET does not depend on what else the machine is doing.
ticks() { local t=0 p f; for p in "$@"; do for f in /proc/"$p"/task/*/stat; do
  t=$((t + $(awk '{print $14 + $15}' "$f"))); done; done; echo "$t"; }
NGINX_PIDS=("${PIDS[1]}" $(pgrep -P "${PIDS[1]}"))
ng_ticks=0 vg_ticks=0 ng_reqs=0 vg_reqs=0
get_run() {  # url pids... -> rps; adds to the tick and request totals of $KIND
  local url=$1; shift
  local t0 out t1 n
  t0=$(ticks "$@")
  out=$("${WRK[@]}" "$url")
  t1=$(ticks "$@")
  n=$(echo "$out" | awk '/requests in/ {print $1}')
  echo "$((t1 - t0)) $n $(echo "$out" | rps)"
}
ng=() vg=() np=() vp=()
for r in $(seq "$ROUNDS"); do
  read -r t n x < <(get_run "http://127.0.0.1:$NPORT/blob" "${NGINX_PIDS[@]}")
  ng+=("$x") && ng_ticks=$((ng_ticks + t)) && ng_reqs=$((ng_reqs + n))
  read -r t n x < <(get_run "http://127.0.0.1:$VPORT/$FID" "${PIDS[0]}")
  vg+=("$x") && vg_ticks=$((vg_ticks + t)) && vg_reqs=$((vg_reqs + n))
  np+=("$("${WRK[@]}" -s bench/volume/webdav_put.lua "http://127.0.0.1:$NPORT" | rps)")
  vp+=("$(WRK_KEY_BASE=$((r * 0x1000000)) "${WRK[@]}" -s bench/volume/put.lua "http://127.0.0.1:$VPORT" | rps)")
  echo "  round $r: GET nginx ${ng[-1]} volume ${vg[-1]}; PUT nginx ${np[-1]} volume ${vp[-1]}"
done
# Durable writes: every PUT waits for fdatasync, concurrent ones share it (group commit).
syncs() { curl -fs "http://127.0.0.1:$VPORT/metrics" | awk '/^kelp_volume_fdatasyncs_total/ {print int($2)}'; }
s0=$(syncs)
fsync_out=$(WRK_KEY_BASE=$((9 * 0x1000000)) WRK_QUERY='?fsync=true' "${WRK[@]}" -s bench/volume/put.lua \
  "http://127.0.0.1:$VPORT")
fsync_put=$(echo "$fsync_out" | rps)
fsync_reqs=$(echo "$fsync_out" | awk '/requests in/ {print $1}')
fsync_syncs=$(($(syncs) - s0))
ngx_get=$(best "${ng[@]}") vol_get=$(best "${vg[@]}") ngx_put=$(best "${np[@]}") vol_put=$(best "${vp[@]}")
rss=$(awk '/VmRSS/ {print $2}' "/proc/${PIDS[0]}/status")
printf "GET  nginx static %8d req/s   volume %8d req/s   ratio %.2f\n" "$ngx_get" "$vol_get" \
  "$(awk -v a="$vol_get" -v b="$ngx_get" 'BEGIN {print a / b}')"
hz=$(getconf CLK_TCK)
printf "GET  server CPU per request: nginx %.1f us, volume %.1f us\n" \
  "$(awk -v t="$ng_ticks" -v n="$ng_reqs" -v hz="$hz" 'BEGIN {print t * 1e6 / hz / n}')" \
  "$(awk -v t="$vg_ticks" -v n="$vg_reqs" -v hz="$hz" 'BEGIN {print t * 1e6 / hz / n}')"
printf "PUT  nginx webdav %8d req/s   volume %8d req/s   ratio %.2f\n" "$ngx_put" "$vol_put" \
  "$(awk -v a="$vol_put" -v b="$ngx_put" 'BEGIN {print a / b}')"
printf "PUT  ?fsync=true                     volume %8d req/s   (%d fdatasyncs for %d writes)\n" \
  "$fsync_put" "$fsync_syncs" "$fsync_reqs"
echo "volume server resident after the runs: $((rss / 1024)) MiB"
