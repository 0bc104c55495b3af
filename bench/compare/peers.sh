# Sourced by bench/compare.sh after common.sh. For each target, setup_<name> brings it up from
# scratch under $CMP_TMP/<name> and sets
#   PEER_MNT        the directory the workloads run in
#   PEER_PIDS       every process of the filesystem (their CPU is counted per workload)
#   PEER_DATA_PIDS  the processes that write its data to disk (their flush syscalls are
#                   counted by the fsync probe); empty for the local disk
#   PEER_VERSION    what ran, for the report
# and teardown_<name> undoes all of it: unmount first, then stop exactly the PIDs it started.
# Targets: local bindfs bindfs-tuned moosefs glusterfs cephfs kelp.
KELP=${KELP:-$CMP_ROOT/build/cmd/kelp}
KELP_MOUNT_FLAGS=${KELP_MOUNT_FLAGS:-"-chunkSizeLimitMB=4 -cacheCapacityMB=1000"}

peer_reset() { PEER_MNT=""; PEER_PIDS=""; PEER_DATA_PIDS=""; PEER_VERSION=""; }

# ---------------------------------------------------------------- local disk
setup_local() {
  mkdir -p "$CMP_TMP/local"
  PEER_MNT=$CMP_TMP/local
  PEER_VERSION="$(findmnt -no FSTYPE -T "$PEER_MNT") on $(findmnt -no SOURCE -T "$PEER_MNT")"
}
teardown_local() { rm -rf "$CMP_TMP/local"; }

# ---------------------------------------------------------------- bindfs (FUSE passthrough)
# default: bindfs's own defaults (single-threaded, attr_timeout=0, 4 KiB writes, libfuse2);
# tuned: multithreaded, big writes, kernel cache, 1 s attribute and entry timeouts.
setup_bindfs_variant() {
  local variant=$1 opts=()
  need_pkg bindfs bindfs || return 1
  local d=$CMP_TMP/bindfs mnt=$MNT_ROOT/bindfs
  is_mounted "$mnt" && { say "$mnt already mounted"; return 1; }
  mkdir -p "$d/src" "$mnt"
  [ "$variant" = tuned ] && opts=(--multithreaded -o big_writes,max_write=131072,kernel_cache,attr_timeout=1,entry_timeout=1)
  nohup bindfs -f "${opts[@]}" "$d/src" "$mnt" >"$d/bindfs.log" 2>&1 &
  echo $! >"$d/bindfs.pid"
  wait_mounted "$mnt" 10 || { cat "$d/bindfs.log" >&2; return 1; }
  PEER_MNT=$mnt
  PEER_PIDS=$(cat "$d/bindfs.pid")
  PEER_DATA_PIDS=$PEER_PIDS
  PEER_VERSION="bindfs $(pkg_version bindfs) ($variant)"
}
setup_bindfs() { setup_bindfs_variant default; }
setup_bindfs-tuned() { setup_bindfs_variant tuned; }
teardown_bindfs() {
  unmount_dir "$MNT_ROOT/bindfs"
  stop_pid "$CMP_TMP/bindfs/bindfs.pid"
  rm -rf "$CMP_TMP/bindfs"
}
teardown_bindfs-tuned() { teardown_bindfs; }

# ---------------------------------------------------------------- MooseFS
# mfsmaster + one mfschunkserver + mfsmount, goal 1, trash time 0, in the netns on 198.18.0.1.
setup_moosefs() {
  need_pkg mfsmaster moosefs-master && need_pkg mfschunkserver moosefs-chunkserver &&
    need_pkg mfsmount moosefs-client && need_pkg mfscli moosefs-cli || return 1
  local d=$CMP_TMP/moosefs mnt=$MNT_ROOT/moosefs i
  is_mounted "$mnt" && { say "$mnt already mounted"; return 1; }
  rm -rf "$d"
  mkdir -p "$d/etc" "$d/master" "$d/cs" "$d/hdd1" "$mnt"
  cat >"$d/etc/mfsmaster.cfg" <<EOF
WORKING_USER = mfs
WORKING_GROUP = mfs
DATA_PATH = $d/master
EXPORTS_FILENAME = $d/etc/mfsexports.cfg
TOPOLOGY_FILENAME = $d/etc/mfstopology.cfg
MATOML_LISTEN_HOST = $NETNS_IP
MATOCS_LISTEN_HOST = $NETNS_IP
MATOCL_LISTEN_HOST = $NETNS_IP
EOF
  echo "$NETNS_IP / rw,alldirs,admin,maproot=0:0" >"$d/etc/mfsexports.cfg"
  : >"$d/etc/mfstopology.cfg"
  cat >"$d/etc/mfschunkserver.cfg" <<EOF
WORKING_USER = mfs
WORKING_GROUP = mfs
DATA_PATH = $d/cs
HDD_CONF_FILENAME = $d/etc/mfshdd.cfg
HDD_FSYNC_BEFORE_CLOSE = 0
BIND_HOST = $NETNS_IP
MASTER_HOST = $NETNS_IP
CSSERV_LISTEN_HOST = $NETNS_IP
EOF
  echo "$d/hdd1" >"$d/etc/mfshdd.cfg"
  cp /var/lib/mfs/metadata.mfs.empty "$d/master/metadata.mfs"
  chown -R mfs:mfs "$d/master" "$d/cs" "$d/hdd1"
  ensure_netns
  in_netns mfsmaster -c "$d/etc/mfsmaster.cfg" start >"$d/master.log" 2>&1 || { cat "$d/master.log" >&2; return 1; }
  in_netns mfschunkserver -c "$d/etc/mfschunkserver.cfg" start >"$d/cs.log" 2>&1 || { cat "$d/cs.log" >&2; return 1; }
  for ((i = 0; i < 60; i++)); do
    in_netns mfscli -H $NETNS_IP -P 9421 -SCS 2>/dev/null | grep -q "$NETNS_IP" && break
    sleep 1
  done
  nohup nsenter --net="/run/netns/$NETNS" mfsmount -f "$mnt" -o mfsmaster=$NETNS_IP,mfsport=9421 >"$d/mfsmount.log" 2>&1 &
  echo $! >"$d/mfsmount.pid"
  wait_mounted "$mnt" 20 || { cat "$d/mfsmount.log" >&2; return 1; }
  in_netns_net mfssetgoal -r 1 "$mnt" >/dev/null
  in_netns_net mfssettrashtime -r 0 "$mnt" >/dev/null
  PEER_MNT=$mnt
  PEER_DATA_PIDS=$(cat "$d/cs/.mfschunkserver.lock")
  PEER_PIDS="$(cat "$d/mfsmount.pid") $(cat "$d/master/.mfsmaster.lock") $PEER_DATA_PIDS"
  PEER_VERSION="MooseFS $(pkg_version moosefs-master)"
}
teardown_moosefs() {
  local d=$CMP_TMP/moosefs
  unmount_dir "$MNT_ROOT/moosefs"
  stop_pid "$d/mfsmount.pid"
  [ -f "$d/etc/mfschunkserver.cfg" ] && mfschunkserver -c "$d/etc/mfschunkserver.cfg" stop >/dev/null 2>&1
  [ -f "$d/etc/mfsmaster.cfg" ] && mfsmaster -c "$d/etc/mfsmaster.cfg" stop >/dev/null 2>&1
  remove_netns
  rm -rf "$d"
}

# ---------------------------------------------------------------- GlusterFS
# glusterd + a one-brick distribute volume + the FUSE client, in the netns on 198.18.0.1.
setup_glusterfs() {
  need_pkg glusterd glusterfs-server && need_pkg glusterfs glusterfs-client || return 1
  local d=$CMP_TMP/glusterfs mnt=$MNT_ROOT/glusterfs vol=kelpcmp i p
  is_mounted "$mnt" && { say "$mnt already mounted"; return 1; }
  rm -rf "$d"
  mkdir -p "$d/wd" "$d/brick1" "$d/log" "$mnt"
  sed "s#option working-directory .*#option working-directory $d/wd#" /etc/glusterfs/glusterd.vol >"$d/glusterd.vol"
  ensure_netns
  in_netns glusterd -f "$d/glusterd.vol" -p "$d/glusterd.pid" -l "$d/log/glusterd.log" || return 1
  for ((i = 0; i < 100; i++)); do in_netns gluster --mode=script pool list >/dev/null 2>&1 && break; sleep 0.2; done
  in_netns gluster --mode=script volume create "$vol" "$NETNS_IP:$d/brick1" force >"$d/log/create.out" 2>&1 || { cat "$d/log/create.out" >&2; return 1; }
  in_netns gluster --mode=script volume start "$vol" >/dev/null || return 1
  in_netns_net mount -t glusterfs -o log-file="$d/log/client.log" "$NETNS_IP:/$vol" "$mnt" || return 1
  wait_mounted "$mnt" 20 || return 1
  for p in $(ip netns pids "$NETNS"); do
    tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- "--process-name fuse.* $mnt" && echo "$p" >"$d/client.pid"
  done
  PEER_MNT=$mnt
  PEER_DATA_PIDS=$(cat /var/run/gluster/vols/"$vol"/*.pid 2>/dev/null | tr '\n' ' ')
  PEER_PIDS="$(cat "$d/client.pid" 2>/dev/null) $PEER_DATA_PIDS $(cat "$d/glusterd.pid")"
  PEER_VERSION="GlusterFS $(pkg_version glusterfs-server)"
}
teardown_glusterfs() {
  local d=$CMP_TMP/glusterfs vol=kelpcmp pf
  unmount_dir "$MNT_ROOT/glusterfs"
  stop_pid "$d/client.pid"
  if [ -s "$d/glusterd.pid" ] && kill -0 "$(cat "$d/glusterd.pid")" 2>/dev/null; then
    in_netns gluster --mode=script volume stop "$vol" force >/dev/null 2>&1
    in_netns gluster --mode=script volume delete "$vol" >/dev/null 2>&1
  fi
  for pf in /var/run/gluster/vols/"$vol"/*.pid; do [ -e "$pf" ] && stop_pid "$pf"; done
  stop_pid "$d/glusterd.pid"
  remove_netns
  rm -rf "$d" /var/run/gluster/vols/"$vol"
}

# ---------------------------------------------------------------- CephFS (ceph-fuse)
# One mon, mgr, OSD (BlueStore on a sparse file) and MDS on 127.0.0.1, pools of size 1, auth
# none, mounted with ceph-fuse. Daemons in the foreground of our background: PIDs known.
setup_cephfs() {
  local pkg
  for pkg in ceph-mon ceph-mgr ceph-osd ceph-mds ceph-fuse; do need_pkg "$pkg" "$pkg" || return 1; done
  need_pkg ceph ceph-common || return 1
  local d=$CMP_TMP/cephfs mnt=$MNT_ROOT/cephfs i
  is_mounted "$mnt" && { say "$mnt already mounted"; return 1; }
  rm -rf "$d"
  mkdir -p "$d/etc" "$d/mon/ceph-a" "$d/mgr/ceph-x" "$d/osd/ceph-0" "$d/mds/ceph-a" "$d/run" "$d/log" "$mnt"
  local fsid conf=$d/etc/ceph.conf
  fsid=$(cat /proc/sys/kernel/random/uuid)
  cat >"$conf" <<EOF
[global]
fsid = $fsid
mon_host = [v2:127.0.0.1:3300,v1:127.0.0.1:6789]
public_addr = 127.0.0.1
cluster_addr = 127.0.0.1
ms_bind_ipv6 = false
auth_cluster_required = none
auth_service_required = none
auth_client_required = none
keyring = $d/etc/keyring
run_dir = $d/run
log_file = $d/log/\$cluster-\$name.log
crash_dir = $d/log/crash
osd_pool_default_size = 1
osd_pool_default_min_size = 1
osd_pool_default_pg_autoscale_mode = off
osd_crush_chooseleaf_type = 0
mon_allow_pool_size_one = true
mon_allow_pool_delete = true
mon_warn_on_pool_no_redundancy = false
mon_warn_on_insecure_global_id_reclaim_allowed = false
mon_data_avail_warn = 10
[mon]
mon_data = $d/mon/\$cluster-\$id
admin_socket = $d/run/\$cluster-\$name.asok
[mgr]
mgr_data = $d/mgr/\$cluster-\$id
admin_socket = $d/run/\$cluster-\$name.asok
mgr_initial_modules = iostat
[osd]
osd_data = $d/osd/\$cluster-\$id
admin_socket = $d/run/\$cluster-\$name.asok
osd_objectstore = bluestore
bluestore_block_path = $d/osd/block
bluestore_block_create = true
bluestore_block_size = $((8 << 30))
bluestore_block_db_create = false
bluestore_block_wal_create = false
bluestore_fsck_on_mkfs = false
osd_memory_target = 1073741824
[mds]
mds_data = $d/mds/\$cluster-\$id
admin_socket = $d/run/\$cluster-\$name.asok
mds_cache_memory_limit = 268435456
[client]
admin_socket = $d/run/\$cluster-\$name.\$pid.asok
EOF
  C() { ceph -c "$conf" "$@"; }
  cstart() { local name=$1; shift; nohup "$@" >"$d/log/$name.out" 2>&1 & echo $! >"$d/run/$name.pid"; }
  ceph-authtool --create-keyring "$d/etc/keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
  ceph-authtool "$d/etc/keyring" --gen-key -n client.admin --cap mon 'allow *' --cap osd 'allow *' \
    --cap mds 'allow *' --cap mgr 'allow *' >/dev/null
  monmaptool --create --fsid "$fsid" --addv a '[v2:127.0.0.1:3300,v1:127.0.0.1:6789]' "$d/etc/monmap" >/dev/null
  ceph-mon -c "$conf" --mkfs -i a --monmap "$d/etc/monmap" --keyring "$d/etc/keyring" >"$d/log/mon-mkfs.out" 2>&1 || return 1
  cstart mon ceph-mon -c "$conf" -f -i a
  for ((i = 0; i < 60; i++)); do C --connect-timeout 2 mon stat >/dev/null 2>&1 && break; sleep 0.5; done
  cstart mgr ceph-mgr -c "$conf" -f -i x
  local uuid id
  uuid=$(cat /proc/sys/kernel/random/uuid)
  id=$(C osd new "$uuid") && [ "$id" = 0 ] || { say "ceph osd new: '$id'"; return 1; }
  ceph-osd -c "$conf" -i 0 --mkfs --osd-uuid "$uuid" >"$d/log/osd-mkfs.out" 2>&1 || return 1
  cstart osd ceph-osd -c "$conf" -f -i 0
  for ((i = 0; i < 120; i++)); do C osd stat 2>/dev/null | grep -q "1 up" && break; sleep 0.5; done
  cstart mds ceph-mds -c "$conf" -f -i a
  { C osd pool create cephfs_metadata 16 16 && C osd pool create cephfs_data 32 32 &&
    C fs new benchfs cephfs_metadata cephfs_data; } >"$d/log/fs-new.out" 2>&1 || return 1
  for ((i = 0; i < 120; i++)); do C mds stat 2>/dev/null | grep -q "up:active" && break; sleep 0.5; done
  for ((i = 0; i < 120; i++)); do C pg stat 2>/dev/null | grep -Eq "^[0-9]+ pgs: [0-9]+ active\+clean;" && break; sleep 0.5; done
  cstart fuse ceph-fuse -c "$conf" -f "$mnt"
  wait_mounted "$mnt" 30 || { cat "$d/log/fuse.out" >&2; return 1; }
  PEER_MNT=$mnt
  PEER_DATA_PIDS=$(cat "$d/run/osd.pid")
  PEER_PIDS=$(cat "$d"/run/*.pid | tr '\n' ' ')
  PEER_VERSION="Ceph $(pkg_version ceph-osd) (ceph-fuse, BlueStore on a sparse file)"
}
teardown_cephfs() {
  local d=$CMP_TMP/cephfs name
  unmount_dir "$MNT_ROOT/cephfs"
  for name in fuse mds osd mgr mon; do stop_pid "$d/run/$name.pid"; done
  rm -rf "$d"
}

# ---------------------------------------------------------------- Kelp
# kelp server (filer + one volume server) and kelp mount with $KELP_MOUNT_FLAGS.
setup_kelp() {
  [ -x "$KELP" ] || { say "no kelp binary at $KELP (build first, or set KELP)"; return 1; }
  local d=$CMP_TMP/kelp mnt=$MNT_ROOT/kelp fp vp i
  is_mounted "$mnt" && { say "$mnt already mounted"; return 1; }
  rm -rf "$d"
  mkdir -p "$d/data" "$mnt"
  fp=$(free_port)
  vp=$(free_port)
  "$KELP" server -dir="$d/data" -filer.port="$fp" -volume.port="$vp" -logLevel=warn >"$d/server.log" 2>&1 &
  echo $! >"$d/server.pid"
  for ((i = 0; i < 100; i++)); do
    curl -fsS "http://127.0.0.1:$fp/status" 2>/dev/null | grep -q '"alive": true' && break
    sleep 0.1
  done
  curl -fsS "http://127.0.0.1:$fp/status" 2>/dev/null | grep -q '"alive": true' || { tail "$d/server.log" >&2; return 1; }
  # shellcheck disable=SC2086
  "$KELP" mount -dir="$mnt" -filer="127.0.0.1:$fp" -cacheDir="$d/cache" $KELP_MOUNT_FLAGS >"$d/mount.log" 2>&1 &
  echo $! >"$d/mount.pid"
  wait_mounted "$mnt" 10 || { tail "$d/mount.log" >&2; return 1; }
  KELP_FILER=127.0.0.1:$fp
  PEER_MNT=$mnt
  PEER_DATA_PIDS=$(cat "$d/server.pid")
  PEER_PIDS="$PEER_DATA_PIDS $(cat "$d/mount.pid")"
  PEER_VERSION="$("$KELP" version | head -1), mount $KELP_MOUNT_FLAGS"
}
teardown_kelp() {
  local d=$CMP_TMP/kelp
  # SIGTERM to the mount flushes and unmounts; then the server.
  stop_pid "$d/mount.pid"
  unmount_dir "$MNT_ROOT/kelp"
  stop_pid "$d/server.pid"
  # The logs stay with the results (the mount's last "cache:" line sums up its read cache).
  [ -n "${OUT:-}" ] && for f in mount server; do cp "$d/$f.log" "$OUT/kelp-$f.log" 2>/dev/null; done
  rm -rf "$d"
}
