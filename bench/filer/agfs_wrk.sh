#!/usr/bin/env bash
# The AGFS seed workloads against the filer's AGFS-compatible HTTP API of `kelp server`:
#   PUT 1 KiB, 4 KiB, 512 KiB   /api/v1/files?path=  (a fresh file per request)
#   GET 1 KiB, 4 KiB, 512 KiB   /api/v1/files?path=  (100 files written beforehand)
#   GET listing                 /api/v1/directories?path=  (a directory of 10,000 files)
# each as `wrk -t4 -c40 -d30s` (AGFS's settings), reads first, on one `kelp server`. Prints req/s and the count of non-2xx
# answers and socket errors per workload; exits 1 if any workload had one.
# Usage: bench/filer/agfs_wrk.sh [BUILD_DIR]
#   env: DURATION=30s THREADS=4 CONNS=40 LIST_ENTRIES=10000 ONLY="put-1k get-1k ..." (subset)
# Needs wrk (apt-get install wrk) and python3. The server it starts listens on 127.0.0.1 on
# free ports, keeps its data in a temporary directory under BUILD_DIR and is stopped by PID
# on exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
DURATION=${DURATION:-30s}
THREADS=${THREADS:-4}
CONNS=${CONNS:-40}
LIST_ENTRIES=${LIST_ENTRIES:-10000}
ONLY=${ONLY:-"put-1k put-4k put-512k get-1k get-4k get-512k list-10k"}
KELP=$BUILD/cmd/kelp
[ -x "$KELP" ] || { echo "missing $KELP: build first" >&2; exit 1; }
command -v wrk >/dev/null || { echo "wrk not installed (apt-get install wrk)" >&2; exit 1; }

WORK=$(mktemp -d "$(cd "$BUILD" && pwd)/bench-filer-http.XXXXXX")
PID=
cleanup() {
  if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
  [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
port_below() { local p; p=$(free_port); while [ "$p" -gt 55000 ]; do p=$(free_port); done; echo "$p"; }
FPORT=$(port_below)  # gRPC ports go on port + 10000
VPORT=$(port_below)
"$KELP" server -dir="$WORK/data" -filer.port="$FPORT" -volume.port="$VPORT" -logLevel=warn \
  >"$WORK/server.log" 2>&1 &
PID=$!
URL=http://127.0.0.1:$FPORT
for _ in $(seq 200); do
  curl -fs -o /dev/null "$URL/dir/assign" && break
  sleep 0.1
done
curl -fs -o /dev/null "$URL/dir/assign" || { echo "server not ready; see $WORK/server.log" >&2; exit 1; }

# Seed over one keep-alive connection: the GET files and the listing directory.
python3 - "$FPORT" "$LIST_ENTRIES" <<'PY'
import http.client, sys
port, entries = int(sys.argv[1]), int(sys.argv[2])
c = http.client.HTTPConnection("127.0.0.1", port)
def req(method, target, body=None):
    c.request(method, target, body=body)
    r = c.getresponse()
    r.read()
    if r.status // 100 != 2:
        sys.exit(f"{method} {target}: {r.status}")
for d in ["/bench", "/bench/put-1k", "/bench/put-4k", "/bench/put-512k", "/bench/get-1k", "/bench/get-4k",
          "/bench/get-512k", "/bench/list"]:
    req("POST", f"/api/v1/directories?path={d}")
for name, size in [("1k", 1024), ("4k", 4096), ("512k", 512 << 10)]:
    for i in range(100):
        req("PUT", f"/api/v1/files?path=/bench/get-{name}/f{i}", bytes([65 + i % 26]) * size)
for i in range(entries):
    req("POST", f"/api/v1/files?path=/bench/list/file-{i:06d}")
PY

echo "kelp server, wrk -t$THREADS -c$CONNS -d$DURATION, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
bad_total=0
run() {  # name script env...
  local name=$1 script=$2; shift 2
  case " $ONLY " in *" $name "*) ;; *) return 0 ;; esac
  local out rps non2xx errs
  out=$(env "$@" wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" -s "bench/filer/$script" "$URL")
  rps=$(echo "$out" | awk '/Requests\/sec/ {printf "%d", $2}')
  non2xx=$(echo "$out" | awk '/Non-2xx/ {print $NF}')
  errs=$(echo "$out" | awk '/Socket errors/ {gsub(",", ""); print $4 + $6 + $8 + $10}')
  local lat
  lat=$(echo "$out" | awk '/Latency/ {print $2; exit}')
  printf "%-9s %9s req/s   avg latency %8s   non-2xx %s   socket errors %s\n" "$name" "$rps" "$lat" \
    "${non2xx:-0}" "${errs:-0}"
  bad_total=$((bad_total + ${non2xx:-0} + ${errs:-0}))
}
run get-1k agfs_get.lua WRK_DIR=/bench/get-1k
run get-4k agfs_get.lua WRK_DIR=/bench/get-4k
run get-512k agfs_get.lua WRK_DIR=/bench/get-512k
run list-10k agfs_list.lua WRK_DIR=/bench/list
# The PUTs last: each adds tens of thousands of files, which the reads above would otherwise
# look up through (RocksDB's memtable grows; see RESULTS.md).
run put-1k agfs_put.lua WRK_BODY_BYTES=1024 WRK_DIR=/bench/put-1k
run put-4k agfs_put.lua WRK_BODY_BYTES=4096 WRK_DIR=/bench/put-4k
run put-512k agfs_put.lua WRK_BODY_BYTES=524288 WRK_DIR=/bench/put-512k
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg); server RSS $(awk '/VmRSS/ {print int($2 / 1024)}' /proc/$PID/status) MiB"
[ "$bad_total" -eq 0 ] || { echo "FAILED: $bad_total non-2xx answers or socket errors" >&2; exit 1; }
