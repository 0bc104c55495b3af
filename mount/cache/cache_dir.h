// The cache directory on disk (docs/cache-format.md): creates it, checks its KELPCACHE version
// file, wipes it when it is from another version or layout or is damaged, holds its LOCK, scans
// the tier directories on open and writes the index hint on close. Entry file contents are
// entry_file.h's business; what to keep is DiskCache's.
//
// Thread-safety: Open, Scan, WriteIndex and the Measure* calls run on the thread opening or
// closing the cache. The descriptors (root_fd, tier_fd) may be used from any thread while the
// CacheDir lives.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "mount/cache/cache_options.h"
#include "mount/cache/entry_file.h"

namespace kelp::mount::cache {

// One entry file found on open, with what the index said about it.
struct ScannedEntry {
  EntryMeta meta;
  uint64_t disk_bytes = 0;   // st_blocks * 512
  uint8_t policy_state = 0;  // EvictionPolicy::Export() state from the index, else 0
};

struct ScanResult {
  // Per tier, in eviction order (coldest first): index order, then newer files by id.
  std::array<std::vector<ScannedEntry>, kNumTiers> tiers;
  uint64_t next_id = 1;   // above every id ever handed out in this directory
  size_t dropped = 0;     // invalid, foreign or torn files removed
  size_t from_index = 0;  // entries the index described (no header read needed)
  bool index_valid = false;
};

// A record of the index hint: one entry and its eviction state, in eviction order.
struct IndexRecord {
  EntryRef entry;
  const std::vector<uint64_t>* page_sums = nullptr;  // PageCount(entry.data_len) of them
  uint8_t policy_state = 0;
};

class CacheDir {
 public:
  // Makes `path` a usable cache directory for `layout`: creates it, or checks it and wipes what
  // is ours in it when it is of another version/layout or damaged. FailedPrecondition if another
  // process holds it (LOCK); other errors when it cannot be created or written.
  static absl::StatusOr<std::unique_ptr<CacheDir>> Open(const std::string& path,
                                                        const TierLayout& layout);
  ~CacheDir();  // closes the descriptors, which releases the LOCK
  CacheDir(const CacheDir&) = delete;
  CacheDir& operator=(const CacheDir&) = delete;

  const std::string& path() const { return path_; }
  int tier_fd(Tier tier) const { return tier_fds_[TierIndex(tier)]; }
  // Allocation unit of the filesystem: entry sizes are estimated in multiples of it.
  uint64_t block_size() const { return block_size_; }

  // Lists the tier directories, keeps complete entries of this layout, removes the rest.
  ScanResult Scan(const TierLayout& layout);

  // Bytes (st_blocks * 512) of the root directory, KELPCACHE, LOCK, and the index files.
  uint64_t MeasureRootMeta() const;
  uint64_t MeasureIndex() const;
  // Bytes of one tier directory itself (its entries' names), not of the files in it.
  uint64_t MeasureTierDir(Tier tier) const;

  static std::string EncodeIndex(const std::vector<IndexRecord>& records, uint64_t next_id);
  // Replaces the index: removes the old one, writes index.tmp, renames it into place.
  absl::Status WriteIndex(std::string_view encoded);

 private:
  CacheDir() = default;
  absl::Status Init(const TierLayout& layout);
  absl::Status Wipe(std::string_view why);
  absl::Status CreateFresh(const TierLayout& layout);

  std::string path_;
  int root_fd_ = -1;
  int lock_fd_ = -1;
  std::array<int, kNumTiers> tier_fds_ = {-1, -1, -1};
  uint64_t block_size_ = 4096;
};

}  // namespace kelp::mount::cache
