// FakeBlobStore: an in-memory BlobStore with fault injection, for tests.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "volume/client/blob_store.h"
#include "shared/mutex.h"

namespace kelp::mount {

class FakeBlobStore : public volume::BlobStore {
 public:
  absl::StatusOr<std::string> Put(std::string_view data, bool fsync) override;
  absl::Status Get(std::string_view fid, uint64_t offset, uint64_t length, const volume::ByteSink& sink) override;
  void Discard(const std::vector<std::string>& fids) override;
  absl::Status SyncVolumes(const std::vector<uint32_t>& volume_ids) override;
  bool ReadsLocally(std::string_view /*fid*/) override { return reads_locally.load(); }

  // What ReadsLocally answers for every blob. Default: false.
  std::atomic<bool> reads_locally{false};
  // Blobs go to volumes 1..volumes in turn (fid "<vid>,<n>00000000"). Default: 1.
  std::atomic<uint32_t> volumes{1};
  // Every SyncVolumes fails with this errno while set (0 = off).
  std::atomic<int> fail_syncs{0};
  // Blobs a power cut would lose: stored without fsync and not synced since.
  size_t volatile_blobs() const;
  size_t sync_calls() const { return sync_calls_.load(); }
  size_t synced_volumes() const { return synced_volumes_.load(); }

  // Fault injection: every Put/Get fails with this errno while set (0 = off).
  std::atomic<int> fail_puts{0};
  std::atomic<int> fail_gets{0};

  // Puts of data starting with prefix wait, before storing anything, until ReleaseHeld()
  // (tests: make one upload finish after a later one). Empty prefix = none held.
  void HoldPutsStartingWith(std::string prefix);
  void ReleaseHeld();
  // Puts waiting now.
  size_t held() const;

  size_t puts() const { return puts_.load(); }
  size_t gets() const { return gets_.load(); }
  uint64_t bytes_got() const { return bytes_got_.load(); }
  // The length of every Get so far, in order.
  std::vector<uint64_t> get_lengths() const {
    MutexLock lock(mu_);
    return get_lengths_;
  }
  size_t synced_puts() const { return synced_puts_.load(); }
  size_t blob_count() const;
  uint64_t stored_bytes() const;

 private:
  mutable Mutex mu_;
  CondVar released_;
  std::string hold_prefix_ ABSL_GUARDED_BY(mu_);
  size_t held_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, std::string, std::less<>> blobs_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, uint32_t> volatile_ ABSL_GUARDED_BY(mu_);  // fid -> volume
  uint64_t next_ ABSL_GUARDED_BY(mu_) = 1;
  std::atomic<uint64_t> bytes_got_{0};
  std::vector<uint64_t> get_lengths_;  // guarded by mu_
  std::atomic<size_t> puts_{0}, gets_{0}, synced_puts_{0}, sync_calls_{0}, synced_volumes_{0};
};

}  // namespace kelp::mount
