#!/usr/bin/env bash
# The README's first command. Installs what is missing, builds, starts the embedded default
# (`kelp server`: filer + one volume server, data under $KELP_DATA) and mounts it at
# $KELP_MOUNT. Data is kept between runs. `scripts/quickstart.sh stop` unmounts and stops.
#
#   KELP_DATA   data directory      (default /var/lib/kelp)
#   KELP_MOUNT  mount point         (default /mnt/kelp)
#   KELP_PORT   filer HTTP port     (default 8888; gRPC on +10000; volume server on 8080)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
DATA=${KELP_DATA:-/var/lib/kelp}
MNT=${KELP_MOUNT:-/mnt/kelp}
PORT=${KELP_PORT:-8888}
VPORT=${KELP_VOLUME_PORT:-8080}
RUN=$DATA/run
KELP=$ROOT/${BUILD_DIR:-build}/cmd/kelp

stop() {
  if mountpoint -q "$MNT" 2>/dev/null; then
    if [ -f "$RUN/mount.pid" ] && kill -0 "$(cat "$RUN/mount.pid")" 2>/dev/null; then
      kill -TERM "$(cat "$RUN/mount.pid")"   # flushes dirty data, then unmounts
      for _ in $(seq 100); do mountpoint -q "$MNT" || break; sleep 0.1; done
    fi
    mountpoint -q "$MNT" && fusermount3 -u "$MNT" 2>/dev/null || true
  fi
  for p in mount server; do
    if [ -f "$RUN/$p.pid" ]; then
      pid=$(cat "$RUN/$p.pid")
      if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid"
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      fi
      rm -f "$RUN/$p.pid"
    fi
  done
  echo "kelp: stopped (data kept in $DATA)"
}

if [ "${1:-}" = "stop" ]; then
  stop
  exit 0
fi

scripts/install-deps.sh
scripts/build.sh
mkdir -p "$DATA" "$RUN" "$MNT"

if [ -f "$RUN/server.pid" ] && kill -0 "$(cat "$RUN/server.pid")" 2>/dev/null; then
  echo "kelp: server already running (pid $(cat "$RUN/server.pid"))"
else
  nohup "$KELP" server -dir="$DATA" -filer.port="$PORT" -volume.port="$VPORT" >>"$RUN/server.log" 2>&1 &
  echo $! >"$RUN/server.pid"
  for _ in $(seq 100); do
    curl -fsS "http://127.0.0.1:$PORT/status" >/dev/null 2>&1 && break
    sleep 0.1
  done
  curl -fsS "http://127.0.0.1:$PORT/status" >/dev/null || { echo "kelp: server did not start; see $RUN/server.log" >&2; exit 1; }
fi

if mountpoint -q "$MNT"; then
  echo "kelp: $MNT is already mounted"
else
  nohup "$KELP" mount -dir="$MNT" -filer="127.0.0.1:$PORT" -chunkSizeLimitMB=4 -cacheCapacityMB=1000 \
    -cacheDir="$DATA/cache" >>"$RUN/mount.log" 2>&1 &
  echo $! >"$RUN/mount.pid"
  for _ in $(seq 100); do mountpoint -q "$MNT" && break; sleep 0.1; done
  mountpoint -q "$MNT" || { echo "kelp: mount did not come up; see $RUN/mount.log" >&2; exit 1; }
fi

cat <<MSG
kelp is running.
  mounted at     $MNT            (try: echo hello > $MNT/hello; ls -l $MNT)
  filer HTTP     http://127.0.0.1:$PORT   (curl http://127.0.0.1:$PORT/hello ; /status ; /metrics)
  data           $DATA (kept between runs)
  logs           $RUN/server.log, $RUN/mount.log
  stop cleanly   $0 stop
  a dead mount   fusermount3 -uz $MNT
MSG
