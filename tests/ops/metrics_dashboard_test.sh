#!/usr/bin/env bash
# The Grafana dashboard (packaging/grafana/kelp-dashboard.json) queries only metrics that Kelp
# exports: a filer, a volume server and a mount with -metricsPort are started, some work is
# done through the mount and the filer's HTTP API (so lazily registered series exist), and
# every kelp_* name in the dashboard's queries must be a sample name on one of the three
# /metrics pages. Also: the JSON is the one make_dashboard.py writes (not edited by hand).
# Usage: metrics_dashboard_test.sh KELP_BINARY. Exit 0 passed, 1 failed.
set -uo pipefail
KELP=${1:?usage: metrics_dashboard_test.sh KELP_BINARY}
FAKE=
# shellcheck source=tests/mount/lib.sh
source "$(dirname "$0")/../mount/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DASH=$ROOT/packaging/grafana/kelp-dashboard.json
start_servers
MP=$(free_port)
M=$T/m
do_mount "$M" -cacheCapacityMB=64 -cacheDir="$T/cache" -metricsPort="$MP"

test_dashboard_is_generated() {
  cp -r "$ROOT/packaging/grafana" "$T/grafana"
  python3 "$T/grafana/make_dashboard.py" >/dev/null
  cmp "$T/grafana/kelp-dashboard.json" "$DASH"
}
check dashboard_is_generated

test_every_queried_metric_is_exported() {
  head -c $((6 << 20)) /dev/urandom >big
  echo small >small
  sync big
  echo 3 >/proc/sys/vm/drop_caches
  cat big small >/dev/null
  head -c 100000 /dev/urandom | curl -fsS -T - "http://127.0.0.1:$FP/web/f" >/dev/null
  curl -fsS "http://127.0.0.1:$FP/web/f" >/dev/null
  curl -fsS -X DELETE "http://127.0.0.1:$FP/web/f" >/dev/null
  { curl -fsS "http://127.0.0.1:$FP/metrics"; curl -fsS "http://127.0.0.1:$VP/metrics"
    curl -fsS "http://127.0.0.1:$MP/metrics"; } | awk '!/^#/ { sub(/\{.*/, "", $1); print $1 }' | sort -u >"$T/exported"
  python3 - "$DASH" >"$T/queried" <<'PY'
import json, re, sys
d = json.load(open(sys.argv[1]))
names = set()
for p in d["panels"]:
    for t in p.get("targets", []):
        names.update(re.findall(r"\bkelp_[a-z0-9_]+", t["expr"]))
print("\n".join(sorted(names)))
PY
  echo "$(wc -l <"$T/queried") metrics queried, $(wc -l <"$T/exported") exported"
  local missing
  cat "$T/queried" | tr "\n" " "
  missing=$(comm -23 "$T/queried" "$T/exported")
  [ -z "$missing" ] || { echo "queried but not exported: $missing"; return 1; }
}
check every_queried_metric_is_exported

cd /
do_unmount "$M"
echo "# passed $PASSED, failed $FAILED"
[ "$FAILED" = 0 ]
