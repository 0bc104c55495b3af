#!/usr/bin/env bash
# Resident memory of a volume server holding N needles: fill a volume with N blobs, restart
# the server (so the index is loaded from disk), and print its RSS and the index size.
# Usage: bench/volume/memory.sh [BUILD_DIR]   (env: N=1048576 SIZE=1024)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
N=${N:-1048576}
SIZE=${SIZE:-1024}
KELP=$BUILD/cmd/kelp
TOOL=$BUILD/volume/volume_tool
WORK=$(mktemp -d "$(cd "$BUILD" && pwd)/bench-volume-mem.XXXXXX")
PID=""
cleanup() {
  [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PORT=$(free_port)
while [ "$PORT" -gt 55000 ]; do PORT=$(free_port); done
start() {
  "$KELP" volume -dir="$WORK" -port="$PORT" -filer= -logLevel=warn -vacuumIntervalSec=0 &
  PID=$!
  for _ in $(seq 600); do curl -fs -o /dev/null "http://127.0.0.1:$PORT/status" && return 0; sleep 0.1; done
  echo "server did not come up" >&2; exit 1
}
rss_mib() { awk '/VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$PID/status"; }
start
"$TOOL" allocate "127.0.0.1:$((PORT + 10000))" 1
"$TOOL" fill "127.0.0.1:$PORT" 1 "$N" "$SIZE" 32
echo "after filling $N needles: RSS $(rss_mib) MiB"
kill "$PID"; wait "$PID" || true
t0=$(date +%s.%N)
start
t1=$(date +%s.%N)
echo "after a restart (index loaded in $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}') s): RSS $(rss_mib) MiB"
curl -fs "http://127.0.0.1:$PORT/status" | python3 -c 'import json,sys; s=json.load(sys.stdin); v=s["Volumes"][0]; print("needles", v["FileCount"], "index bytes", v["IndexMemory"], "= %.1f bytes/needle" % (v["IndexMemory"]/max(1,v["FileCount"])))'
