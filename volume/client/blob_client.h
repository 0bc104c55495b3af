// BlobClient: BlobStore over the volume servers' HTTP data plane (VolumeClient), the one way the
// project stores and fetches blobs: the mount through its FilerClient, the filer's HTTP API
// through its own Topology. What differs between them is only how they reach the coordinator
// (Coordinator below).
//
// - Fids come from Assign in batches (keys base .. base + count - 1 of one assignment, with the
//   assignment's write token); a failed upload is retried on a fresh assignment (another
//   volume, maybe another server) unless no other volume can help (EFBIG, EINVAL).
// - Volume locations come from LookupVolume, cached for location_ttl and looked up again when
//   every cached replica failed; a read goes on from the next replica where one failed.
// - Local reads (Options::local_reads): a whole-blob read from a replica on a loopback address
//   comes straight from that server's .dat file (LocalReader, docs/volume-http.md), and over
//   HTTP when that fails; a server that refuses them, or whose file this process cannot open,
//   is not asked again.
// - SyncVolumes sends one POST /sync per server holding the volumes (that server syncs the other
//   replicas), falling back to every other holder of a volume whose sync failed.
//
// Thread-safety: every method may be called from any thread. mu_ guards the fid pool and the
// location cache and is never held across I/O.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "proto/cluster.pb.h"
#include "shared/file_id.h"
#include "shared/metrics.h"
#include "shared/mutex.h"
#include "volume/client/blob_store.h"
#include "volume/client/local_reader.h"
#include "volume/client/volume_client.h"

namespace kelp::volume {

// How a BlobClient reaches the cluster's coordinator (the filer).
struct Coordinator {
  std::function<absl::StatusOr<cluster::AssignResponse>(const cluster::AssignRequest&)> assign;
  std::function<absl::StatusOr<cluster::LookupVolumeResponse>(const cluster::LookupVolumeRequest&)> lookup;
  // Deletes blobs from every replica, one status per fid; null: Discard only logs.
  std::function<std::vector<absl::Status>(const std::vector<std::string>&)> delete_blobs;
};

class BlobClient : public BlobStore {
 public:
  struct Options {
    // Replication and collection of new blobs; "" = the cluster's default.
    std::string replication;
    std::string collection;
    // Fids asked for per Assign. Default: 16.
    uint32_t assign_batch = 16;
    // How long a looked-up volume location is trusted. Default: 600 s.
    std::chrono::seconds location_ttl{600};
    // Attempts of one upload, each on a fresh assignment after the first. Default: 3.
    int put_attempts = 3;
    // Whole-blob reads from volume servers on this machine read their .dat files (see above).
    // Default: false.
    bool local_reads = false;
    // Names the metrics: <prefix>_put_bytes_total, _get_bytes_total, _put_retries_total,
    // _get_failovers_total, _syncs_total, _local_reads_total, _local_read_fallbacks_total.
    // Default: "kelp_blob".
    std::string metric_prefix = "kelp_blob";
  };
  // client must outlive this.
  BlobClient(Coordinator coordinator, VolumeClient* client, Options options);

  absl::StatusOr<std::string> Put(std::string_view data, bool fsync) override;
  absl::Status Get(std::string_view fid, uint64_t offset, uint64_t length, const ByteSink& sink) override;
  absl::Status SyncVolumes(const std::vector<uint32_t>& volume_ids) override;
  void Discard(const std::vector<std::string>& fids) override;
  bool ReadsLocally(std::string_view fid) override;

 private:
  // Fresh assignments a retry asks for while they point at a server that already failed it.
  static constexpr int kReassigns = 4;
  struct Assigned {
    FileId fid;
    std::vector<std::string> urls;
    std::string auth;  // the assignment's write token ("" = none)
  };
  struct Locations {
    std::vector<std::string> urls;
    std::chrono::steady_clock::time_point fetched;
  };
  absl::StatusOr<Assigned> NextFid();
  void DropPool();
  absl::StatusOr<std::vector<std::string>> LocationsOf(uint32_t volume_id, bool refresh);
  // What is known of a server's local reads: untried, working, or not for this process (for
  // good when it refused or its file could not be opened; for kLocalRetry when it did not
  // answer or its needle was not in the file where it said).
  enum class Local { kUntried, kYes, kNo };
  struct LocalState {
    Local state = Local::kUntried;
    std::chrono::steady_clock::time_point retry_after;  // zero: for good
  };
  static constexpr std::chrono::seconds kLocalRetry{30};
  Local LocalStateLocked(const std::string& url) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The replica among urls a local read goes to ("" = none): the first on a loopback address
  // that has not said no.
  std::string LocalReplica(const std::vector<std::string>& urls);
  // Records what a local read or probe of url said (see Local); other failures (a damaged
  // needle, one that moved) change nothing.
  void NoteLocal(const std::string& url, const absl::Status& s);

  const Coordinator coord_;
  VolumeClient* const client_;
  const Options opts_;
  Counter* put_bytes_;
  Counter* get_bytes_;
  Counter* put_retries_;
  Counter* get_failovers_;
  Counter* syncs_;
  Counter* local_reads_;
  Counter* local_read_bytes_;
  Counter* local_fallbacks_;
  std::unique_ptr<LocalReader> local_reader_;  // null without Options::local_reads

  Mutex mu_;
  // The current assignment: keys pool_base_.key + pool_next_ .. + pool_count_ - 1 are unused.
  FileId pool_base_ ABSL_GUARDED_BY(mu_);
  uint32_t pool_next_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t pool_count_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> pool_urls_ ABSL_GUARDED_BY(mu_);
  std::string pool_auth_ ABSL_GUARDED_BY(mu_);
  std::map<uint32_t, Locations> locations_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, LocalState> local_state_ ABSL_GUARDED_BY(mu_);
};

// Reads [offset, offset + length) of one blob from its replicas in turn: read(url, off, len,
// sink) asks one replica; a replica that fails or comes up short is resumed on the next from
// the first byte the sink has not taken. Returns the last replica's error when none finishes
// (and a sink's error at once). *failovers counts replicas that failed.
using RangeReader =
    std::function<absl::Status(const std::string& url, uint64_t offset, uint64_t length, const ByteSink& sink)>;
absl::Status ReadWithFailover(const std::vector<std::string>& urls, uint64_t offset, uint64_t length,
                              const RangeReader& read, const ByteSink& sink, int* failovers);

}  // namespace kelp::volume
