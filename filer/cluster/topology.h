// The cluster as the filer sees it: volume servers (from their heartbeats), the volumes and
// replicas they hold, which volumes are writable, and the persisted sequences for volume ids
// and needle keys. It answers Assign and LookupVolume and grows new volumes on demand.
// SeaweedFS's master does this job; in Kelp the filer does.
//
// Threads: every public method may be called from any thread. State sits under one mutex
// held only for in-memory work; RPCs to volume servers (allocating volumes, deleting blobs)
// happen outside it. A background thread marks servers dead when their heartbeats stop.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/base/thread_annotations.h"
#include "filer/cluster/cluster_api.h"
#include "filer/cluster/placement.h"
#include "filer/cluster/volume_admin.h"
#include "filer/store/kv_store.h"
#include "filer/store/sequence.h"
#include "proto/cluster.pb.h"
#include "shared/mutex.h"

namespace kelp::filer {

class Topology : public ClusterApi {
 public:
  struct Options {
    // A volume at or over this size takes no new writes. Default: 30000 MiB.
    uint64_t volume_size_limit = 30000ull << 20;
    // Replication used when a request names none. Default: "000" (one copy).
    std::string default_replication = "000";
    // Heartbeat interval asked of volume servers, in ms. Default: 1000.
    uint32_t pulse_ms = 1000;
    // A server silent for this long is dead, in ms. Default: 5000.
    uint32_t dead_after_ms = 5000;
    // Volumes allocated per growth; 0 = by copies (1 copy: 4, 2: 3, 3: 2, more: 1).
    int growth_count = 0;
    // The clock heartbeats and liveness are timed with; tests pass one they advance.
    // Default: std::chrono::steady_clock::now.
    std::function<std::chrono::steady_clock::time_point()> now;
  };

  Topology(Options options, KvStore* kv, VolumeAdmin* admin);
  ~Topology() override;

  // Loads the persisted sequences and starts the liveness thread.
  absl::Status Start();
  void Stop();

  cluster::HeartbeatResponse Heartbeat(const cluster::HeartbeatRequest& req);

  // ClusterApi
  absl::StatusOr<cluster::AssignResponse> Assign(const cluster::AssignRequest& req) override;
  absl::StatusOr<cluster::LookupVolumeResponse> LookupVolume(const cluster::LookupVolumeRequest& req) override;
  Capacity GetCapacity() override;
  std::vector<absl::Status> DeleteBlobs(const std::vector<std::string>& fids) override;

  // For a while, an Assign that finds no writable volume waits for heartbeats rather than
  // growing new volumes: a filer that just became the coordinator knows no volumes until the
  // volume servers have found it.
  void HoldGrowthFor(std::chrono::milliseconds d);
  // For a while, a LookupVolume of a volume no server has reported yet waits for heartbeats
  // (until one reports it, or the while ends) rather than answering "not found": a filer that
  // just started, or just became the coordinator, knows no volumes until the volume servers
  // have found it, and a reader must not see EIO for a blob that is there. A volume whose
  // servers were seen and went silent is answered at once ("no live replica").
  void AwaitVolumesFor(std::chrono::milliseconds d);
  bool LookupMayWait() override;
  // Allocates count new volumes of a layout now (SeaweedFS's volume.grow). OK if at least one
  // could be placed.
  absl::Status GrowVolumes(const std::string& collection, const std::string& replication, int count);

  // True when Assign for this layout can answer from memory (no volume growth needed).
  bool HasWritable(const std::string& collection, const std::string& replication) const;
  nlohmann::json StatusJson() const;
  // Marks servers whose heartbeats stopped as dead; the liveness thread calls it every pulse.
  void CheckLiveness();

 private:
  struct Server {
    cluster::HeartbeatRequest last;  // without volumes
    std::chrono::steady_clock::time_point last_seen;
    bool alive = false;
    std::set<uint32_t> volumes;
  };
  struct Volume {
    std::string collection;
    std::string replication;  // normalized "xyz"
    int copies = 1;           // replication's copy count
    // Whether it sits in its layout's writable list (kept equal to WritableLocked by
    // RefreshWritableLocked whenever a replica, its server's liveness or its size changes).
    bool writable = false;
    std::map<std::string, volume::VolumeInfo> replicas;  // by server url
    // When the filer allocated it: a heartbeat composed before the allocation must not
    // remove the new replica again.
    std::chrono::steady_clock::time_point allocated_at;
  };
  struct Layout {
    bool growing = false;
    // The writable volumes of this layout, in no order; an Assign picks one at random
    // without looking at the others. writable_pos is each one's index in it.
    std::vector<uint32_t> writable;
    std::unordered_map<uint32_t, size_t> writable_pos;
  };

  static std::string LayoutKey(const std::string& collection, const std::string& replication);
  bool WritableLocked(const Volume& v) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sets a volume's layout (out of the old layout's writable list first).
  void SetLayoutLocked(uint32_t vid, Volume& v, const std::string& collection, const Replication& rep)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Puts the volume into, or takes it out of, its layout's writable list as WritableLocked says.
  void RefreshWritableLocked(uint32_t vid, Volume& v) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetWritableLocked(uint32_t vid, Volume& v, bool writable) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // An assign that found no room: ENOSPC (or RESOURCE_EXHAUSTED) becomes UNAVAILABLE when
  // servers taken for dead have room (free slots, or a volume of the layout not full).
  absl::Status NoRoomLocked(absl::Status why, const std::string& collection, const std::string& replication) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets a volume (no replica left).
  void EraseVolumeLocked(std::map<uint32_t, Volume>::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  cluster::Location LocationOf(const std::string& url) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Allocates new volumes for a layout (want 0 = options.growth_count or by copies); called
  // without mu_ held.
  absl::Status Grow(const std::string& collection, const Replication& rep, int want = 0);

  std::chrono::steady_clock::time_point Now() const {
    return opts_.now ? opts_.now() : std::chrono::steady_clock::now();
  }

  const Options opts_;
  KvStore* const kv_;
  VolumeAdmin* const admin_;
  SequenceAllocator volume_ids_;
  SequenceAllocator needle_keys_;

  // Lock order: mu_, then the SequenceAllocators' (leaf) mutexes; stop_mu_ is a leaf never
  // held with mu_. No RPC is made under mu_ (Grow releases it first).
  mutable Mutex mu_;
  CondVar grown_;  // signalled when a growth finishes and on every heartbeat
  std::map<std::string, Server> servers_ ABSL_GUARDED_BY(mu_);  // by url (ip:port)
  std::map<uint32_t, Volume> volumes_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Layout> layouts_ ABSL_GUARDED_BY(mu_);  // by LayoutKey
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point no_grow_until_ ABSL_GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point await_volumes_until_ ABSL_GUARDED_BY(mu_);

  Mutex stop_mu_;
  CondVar stop_cv_;
  bool stopping_ ABSL_GUARDED_BY(stop_mu_) = false;
  std::thread liveness_;
};

}  // namespace kelp::filer
