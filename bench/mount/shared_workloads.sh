#!/usr/bin/env bash
# Runs ../shared/bench/run-workloads.sh (the peer comparison harness: MooseFS, GlusterFS,
# bindfs, local disk; reference figures in ../shared/bench/reference/) on a kelp mount with
# its defaults, counting the CPU of `kelp server` and `kelp mount` (FS_PIDS).
#
#   SHARED_BENCH=<repo>/../shared/bench  WORKLOADS="a b c d e"  RESULTS_DIR=$KB_DIR/results
#   LABEL=kelp  MOUNT_FLAGS=""  KELP  KB_DIR  KB_KEEP (results are kept by copying RESULTS_DIR)
set -u
# shellcheck source=bench/lib/kelp_bench.sh
source "$(dirname "$0")/../lib/kelp_bench.sh"
SHARED_BENCH=${SHARED_BENCH:-$KB_ROOT/../shared/bench}
LABEL=${LABEL:-kelp}
MOUNT_FLAGS=${MOUNT_FLAGS:-}
export WORKLOADS=${WORKLOADS:-"a b c d e"}
export RESULTS_DIR=${RESULTS_DIR:-$KB_DIR/results}
[ -x "$SHARED_BENCH/run-workloads.sh" ] || kb_die "no $SHARED_BENCH/run-workloads.sh"

kb_log "$(kb_machine)"
kb_start_server
# shellcheck disable=SC2086
kb_mount "$KB_DIR/kelp" -cacheDir="$KB_DIR/cache" $MOUNT_FLAGS
kb_log "load $(kb_load); workloads $WORKLOADS"
FS_PIDS="$KB_SERVER_PID ${KB_MOUNT_PID[$KB_DIR/kelp]}" "$SHARED_BENCH/run-workloads.sh" "$KB_DIR/kelp" "$LABEL"
cat "$RESULTS_DIR/$LABEL.txt"
