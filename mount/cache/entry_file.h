// One cache block on disk: an entry file (docs/cache-format.md, "Entry files"). Encodes,
// writes, verifies and reads them; knows nothing about tiers' capacity or eviction.
//
// Thread-safety: free functions on file descriptors; any thread, concurrently. A file is
// written once, under a fresh name, before anyone can look it up, and never modified.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mount/cache/cache_options.h"

namespace kelp::mount::cache {

// What an entry file says about itself. fid views the caller's string.
struct EntryRef {
  std::string_view fid;
  uint64_t blob_size = 0;
  uint64_t block_offset = 0;
  uint32_t data_len = 0;
  Tier tier = Tier::kSmall;
  uint64_t id = 0;  // the file name, unique for the life of the directory
};

// Same, owning its fid (from a scan).
struct EntryMeta {
  std::string fid;
  uint64_t blob_size = 0;
  uint64_t block_offset = 0;
  uint32_t data_len = 0;
  Tier tier = Tier::kSmall;
  uint64_t id = 0;
  EntryRef ref() const { return {fid, blob_size, block_offset, data_len, tier, id}; }
};

// Bytes before the data: fixed header, fid, page checksum table.
uint64_t EntryHeaderLen(size_t fid_len, uint64_t data_len);
inline uint64_t EntryFileSize(size_t fid_len, uint64_t data_len) {
  return EntryHeaderLen(fid_len, data_len) + data_len;
}

// "%016x" of id, and back (false unless exactly 16 lowercase hex digits).
std::string EntryFileName(uint64_t id);
bool ParseEntryFileName(std::string_view name, uint64_t* id);

// Creates dirfd/EntryFileName(entry.id) (it must not exist) holding data, unsynced. Returns the
// bytes it occupies (st_blocks * 512). On failure nothing is left behind.
absl::StatusOr<uint64_t> WriteEntryFile(int dirfd, const EntryRef& entry, std::string_view data);

// Copies data bytes [offset, offset + len) of the entry into dst after checking that the file's
// header matches `expected` and that every 4 KiB page the range touches matches its checksum.
// NotFound: no such file. DataLoss: mismatch, bad checksum, short file. Anything else: an I/O
// error, with its errno. On failure dst holds garbage.
absl::Status ReadEntryFile(int dirfd, const EntryRef& expected, uint64_t offset, size_t len,
                           char* dst);

// Reads and checks the header of dirfd/EntryFileName(id), whose size is file_size (for the scan
// on open). DataLoss unless it is a complete, self-consistent entry of that id and tier.
absl::StatusOr<EntryMeta> ReadEntryHeader(int dirfd, uint64_t id, Tier tier, uint64_t file_size);

}  // namespace kelp::mount::cache
