#!/usr/bin/env bash
# bench/compare.sh -quick, as CI runs it: the local disk and Kelp set up, measured with every
# workload (small sizes) and torn down; the report has the fsync probe, a table per workload
# with Kelp's ratio to the local disk, and PNG charts; no step of either target failed (NA),
# and nothing is left mounted or running.
# Usage: compare_quick_test.sh KELP_BINARY OUT_DIR. Exit 0 passed, 1 failed.
set -uo pipefail
KELP=${1:?usage: compare_quick_test.sh KELP_BINARY OUT_DIR}
OUT=${2:?usage: compare_quick_test.sh KELP_BINARY OUT_DIR}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
fail() { echo "not ok - $*"; exit 1; }
t0=$(date +%s)
KELP=$KELP "$ROOT/bench/compare.sh" -quick -out="$OUT" || fail "compare.sh -quick exited $?"
echo "compare.sh -quick took $(( $(date +%s) - t0 )) s"
R=$OUT/report.md
[ -s "$R" ] || fail "no report"
for want in "Is fsync durable?" "Kelp vs local disk" "sysbench fileio" "fio (psync" "shell operations" \
  "metadata: empty files" "write + fsync pairs" "nginx serving files"; do
  grep -qF "$want" "$R" || fail "the report has no \"$want\""
done
grep -q '^| Kelp | [0-9,]* | [0-9,]* | yes' "$R" || fail "Kelp's fsync probe did not show durable flushes: $(grep '^| Kelp |' "$R" | head -1)"
for png in sysbench fio shell meta fsync nginx; do
  f=$OUT/charts/compare-$png.png
  [ "$(head -c 8 "$f" 2>/dev/null | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "$f is not a PNG"
done
na=$(grep -h ' NA ' "$OUT"/results/local.txt "$OUT"/results/kelp.txt)
[ -z "$na" ] || fail "steps failed: $na"
grep -q "kelp-compare" /proc/self/mountinfo && fail "something is still mounted under the compare folder"
echo "ok - compare.sh -quick: report, charts, every step measured, all torn down"
