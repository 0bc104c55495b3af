#!/usr/bin/env bash
# The web UI (/ui on the filer's port) in headless Chromium: ui_test.cjs drives it against
# kelp filer + kelp volume + a kelp mount started here. playwright-core (npm, the version in
# package.json) is installed once into UI_DEPS; Chromium is Debian's (scripts/install-deps.sh).
# Screenshots: ARTIFACT_DIR (CTest: build/test-artifacts).
# Usage: ui_test.sh KELP_BINARY. Exit 0 passed, 1 failed.
set -uo pipefail
KELP=${1:?usage: ui_test.sh KELP_BINARY}
FAKE=
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/mount/lib.sh
source "$HERE/../mount/lib.sh"
UI_DEPS=${UI_DEPS:-$(dirname "$(realpath "$KELP")")/../ui-test-deps}
export ARTIFACT_DIR=${ARTIFACT_DIR:-$T/artifacts}
VERSION=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["dependencies"]["playwright-core"])' "$HERE/package.json")
if [ ! -f "$UI_DEPS/node_modules/playwright-core/package.json" ] ||
   ! grep -q "\"version\": \"$VERSION\"" "$UI_DEPS/node_modules/playwright-core/package.json"; then
  mkdir -p "$UI_DEPS"
  npm install --silent --no-save --no-package-lock --no-audit --no-fund --prefix "$UI_DEPS" "playwright-core@$VERSION" >&2 ||
    { echo "npm install playwright-core@$VERSION failed"; exit 1; }
fi
[ -x /usr/bin/chromium ] || { echo "no /usr/bin/chromium (scripts/install-deps.sh installs it)"; exit 1; }

start_servers
M=$T/m
do_mount "$M" -cacheCapacityMB=0 -entryTimeout=1 -attrTimeout=1
mkdir "$M/frommount"
echo hello >"$M/frommount/hello.txt"
FILER=127.0.0.1:$FP MOUNT=$M UI_DEPS=$UI_DEPS node "$HERE/ui_test.cjs"
rc=$?
cd /
do_unmount "$M" || true
exit $rc
