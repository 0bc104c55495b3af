# Sourced by bench/compare.sh and bench/compare/*.sh: logging, packages, mounts, stopping
# processes by PID, and the private network namespace MooseFS and GlusterFS need.
# Everything a peer makes lives under $CMP_TMP/<peer>; mount points under $CMP_TMP/mnt/<peer>.
CMP_TMP=${CMP_TMP:-/var/tmp/kelp-compare}
MNT_ROOT=$CMP_TMP/mnt
CMP_LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CMP_ROOT=$(cd "$CMP_LIB/../.." && pwd)

say() { echo "[compare $(date +%T)] $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

# need_pkg CMD PKG...: apt-get install PKG when CMD is missing (root only).
need_pkg() {
  local cmd=$1
  shift
  command -v "$cmd" >/dev/null 2>&1 && return 0
  [ "$(id -u)" = 0 ] || { say "$cmd missing and not root: apt-get install $*"; return 1; }
  say "installing $* (Debian)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null 2>&1; } ||
    { say "apt-get install $* failed"; return 1; }
}

pkg_version() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo "?"; }

is_mounted() { mountpoint -q "$1" 2>/dev/null; }
wait_mounted() {  # DIR SECONDS
  local i
  for ((i = 0; i < $2 * 10; i++)); do is_mounted "$1" && return 0; sleep 0.1; done
  return 1
}
unmount_dir() {  # DIR: unmount (FUSE or not), lazily if busy after 10 s
  local d=$1 i
  is_mounted "$d" || return 0
  sync
  fusermount3 -u "$d" 2>/dev/null || fusermount -u "$d" 2>/dev/null || umount "$d" 2>/dev/null
  for ((i = 0; i < 100; i++)); do is_mounted "$d" || return 0; sleep 0.1; done
  say "unmount of $d busy, lazy-unmounting"
  umount -l "$d" 2>/dev/null || fusermount3 -uz "$d" 2>/dev/null
}
# stop_pid PIDFILE|PID: SIGTERM, up to 30 s, then SIGKILL; that PID only.
stop_pid() {
  local pid=$1 i
  if [ -f "$pid" ]; then
    local f=$pid
    pid=$(cat "$f" 2>/dev/null)
    rm -f "$f"
  fi
  [ -n "$pid" ] || return 0
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null
  for ((i = 0; i < 300; i++)); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  say "pid $pid ignored SIGTERM, SIGKILL"
  kill -KILL "$pid" 2>/dev/null
}
free_port() { python3 "$CMP_ROOT/tests/mount/free_port.py"; }  # p with p and p+10000 free

# MooseFS's chunkserver refuses a 127.x master and the gluster CLI refuses a loopback brick, so
# both run in a private network namespace whose only device is its loopback, carrying
# 127.0.0.1 and 198.18.0.1/32 (the RFC 2544 benchmarking range): nothing in it reaches any
# other host. FUSE clients enter only its network namespace, so their mounts stay visible.
NETNS=${NETNS:-kelpcmp}
NETNS_IP=198.18.0.1
ensure_netns() {
  ip netns list | grep -qw "$NETNS" || ip netns add "$NETNS" || die "ip netns add failed"
  ip -n "$NETNS" link set lo up
  ip -n "$NETNS" addr show dev lo | grep -q "$NETNS_IP/" || ip -n "$NETNS" addr add "$NETNS_IP/32" dev lo
}
in_netns() { ip netns exec "$NETNS" "$@"; }
in_netns_net() { nsenter --net="/run/netns/$NETNS" "$@"; }
remove_netns() {
  local i
  ip netns list | grep -qw "$NETNS" || return 0
  for ((i = 0; i < 50; i++)); do [ -z "$(ip netns pids "$NETNS" 2>/dev/null)" ] && break; sleep 0.2; done
  if [ -n "$(ip netns pids "$NETNS" 2>/dev/null)" ]; then
    say "netns $NETNS still has processes: $(ip netns pids "$NETNS" | tr '\n' ' '), keeping it"
    return 0
  fi
  ip netns del "$NETNS"
}
