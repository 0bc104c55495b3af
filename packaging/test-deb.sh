#!/usr/bin/env bash
# packaging/test-deb.sh [DEB]: installs the Debian package on a clean Debian 12 (a minbase
# debootstrap in a folder, chrooted into) with `apt install ./kelp_*.deb`, and checks what a
# user gets: the binary, mount.kelp where mount(8) finds it, the units, man pages, docs; then
# starts `kelp server` in the chroot, loads /ui and /status, mounts it with
# `mount -t kelp 127.0.0.1:PORT:/ DIR -o chunkSizeLimitMB=4`, writes and reads a file,
# `umount`s, and checks that the file is on the filer. Not part of the default test run (the
# debootstrap takes minutes); run it as root after scripts/package.sh.
#
#   DEB          the package (default: the newest build/kelp_*_amd64.deb)
#   MIRROR       Debian mirror (default: the first one of this machine's apt sources)
#   DEB_TEST_DIR work folder, kept between runs for its base-system tarball
#                (default /var/tmp/kelp-deb-test)
set -euo pipefail
cd "$(dirname "$0")/.."
DEB=${1:-$(ls -t build/kelp_*_amd64.deb 2>/dev/null | head -1)}
[ -f "$DEB" ] || { echo "no package: run scripts/package.sh first" >&2; exit 2; }
DEB=$(realpath "$DEB")
[ "$(id -u)" = 0 ] || { echo "run as root (debootstrap, chroot)" >&2; exit 2; }
W=${DEB_TEST_DIR:-/var/tmp/kelp-deb-test}
MIRROR=${MIRROR:-$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null ||
  awk '/^deb / {print $2; exit}' /etc/apt/sources.list)}
command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
say() { echo "[test-deb $(date +%T)] $*" >&2; }

mkdir -p "$W"
BASE=$W/bookworm-minbase.tar
if [ ! -s "$BASE" ]; then
  say "debootstrap --variant=minbase bookworm (once; kept in $BASE)"
  rm -rf "$W/base"
  debootstrap --variant=minbase bookworm "$W/base" "$MIRROR" >"$W/debootstrap.log" 2>&1 ||
    { tail -20 "$W/debootstrap.log" >&2; exit 1; }
  tar -C "$W/base" -cf "$BASE.tmp" . && mv "$BASE.tmp" "$BASE"
  rm -rf "$W/base"
fi
R=$W/root
rm -rf "$R"
mkdir -p "$R"
tar -C "$R" -xf "$BASE"
# This machine's apt sources (the base system has only the main suite) and resolver.
rm -f "$R/etc/apt/sources.list"
cp /etc/apt/sources.list.d/*.sources "$R/etc/apt/sources.list.d/" 2>/dev/null || cp /etc/apt/sources.list "$R/etc/apt/"
cp /etc/resolv.conf "$R/etc/resolv.conf"
cp "$DEB" "$R/tmp/"
PKG=/tmp/$(basename "$DEB")
PORT=$(python3 tests/mount/free_port.py)
VPORT=$(python3 tests/mount/free_port.py)

# In a private mount namespace: /proc, /sys, /dev and the FUSE mount vanish with it.
unshare --mount --propagation private bash -s "$R" "$PKG" "$PORT" "$VPORT" <<'INNER'
set -euo pipefail
R=$1 PKG=$2 PORT=$3 VPORT=$4
say() { echo "[test-deb $(date +%T)] $*" >&2; }
mount -t proc proc "$R/proc"
mount --rbind /sys "$R/sys"
mount --rbind /dev "$R/dev"
C() { chroot "$R" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C DEBIAN_FRONTEND=noninteractive "$@"; }
say "apt install ./$(basename "$PKG") on a clean Debian 12"
C apt-get update -qq
C apt-get install -y -qq "$PKG" >"$R/tmp/apt.log" 2>&1 || { tail -30 "$R/tmp/apt.log" >&2; exit 1; }
grep -E "^(Unpacking|Setting up) kelp" "$R/tmp/apt.log" >&2
C dpkg -s kelp | grep -E "^(Version|Depends):" >&2
fail() { say "FAIL: $*"; exit 1; }
C kelp version || fail "kelp version"
[ "$(C readlink -f /usr/sbin/mount.kelp)" = /usr/bin/kelp ] || fail "mount.kelp is not a link to kelp"
for f in /usr/lib/systemd/system/kelp-server.service /usr/lib/systemd/system/kelp-mount@.service \
  /usr/lib/systemd/system/kelp-volume@.service /usr/lib/systemd/system/kelp-filer.service /etc/default/kelp \
  /usr/share/man/man1/kelp.1.gz /usr/share/man/man1/kelp-mount.1.gz /usr/share/man/man8/mount.kelp.8.gz \
  /usr/share/doc/kelp/README.md /usr/share/doc/kelp/systemd.md; do
  [ -e "$R$f" ] || fail "$f missing"
done
zcat "$R/usr/share/man/man1/kelp-mount.1.gz" | grep -q 'chunkSizeLimitMB' || fail "kelp-mount(1) has no flags"
say "package contents OK; starting kelp server in the chroot"
# chroot and env exec: $! is the server's own PID, stopped by it at exit.
chroot "$R" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
  kelp server -dir=/var/lib/kelp/test -filer.port="$PORT" -volume.port="$VPORT" -logLevel=warn >"$R/tmp/server.log" 2>&1 &
SERVER=$!
trap 'kill -TERM $SERVER 2>/dev/null; wait $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 100); do C curl -fsS "http://127.0.0.1:$PORT/status" 2>/dev/null | grep -q '"alive": true' && break; sleep 0.1; done
C curl -fsS "http://127.0.0.1:$PORT/ui" | grep -q '<title>Kelp</title>' || fail "/ui"
mkdir -p "$R/mnt/k"
C mount -t kelp "127.0.0.1:$PORT:/" /mnt/k -o chunkSizeLimitMB=4,cacheCapacityMB=100,_netdev || fail "mount -t kelp"
mountpoint -q "$R/mnt/k" || fail "not mounted after mount -t kelp returned"
C sh -c 'head -c 5000000 /dev/urandom > /mnt/k/blob && sha256sum /mnt/k/blob | cut -d" " -f1 > /tmp/sum'
C umount /mnt/k || fail "umount"
mountpoint -q "$R/mnt/k" && fail "still mounted after umount"
[ "$(C curl -fsS "http://127.0.0.1:$PORT/blob" | sha256sum | cut -d' ' -f1)" = "$(cat "$R/tmp/sum")" ] ||
  fail "the file written through mount -t kelp is not on the filer after umount"
say "PASS: installed, mounted with mount -t kelp, wrote 5 MB, umount flushed it"
INNER
rm -rf "$R"
