// One cache block on disk: an entry file (docs/cache-format.md, "Entry files"). Encodes,
// writes, verifies and reads them; knows nothing about tiers' capacity or eviction.
//
// Thread-safety: free functions on file descriptors; any thread, concurrently. A file is
// written once, under a fresh name, before anyone can look it up, and never modified.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mount/cache/cache_format.h"
#include "mount/cache/cache_options.h"

namespace kelp::mount::cache {

// What an entry file says about itself, less its page checksums. fid views the caller's string.
struct EntryRef {
  std::string_view fid;
  uint64_t blob_size = 0;
  uint64_t block_offset = 0;
  uint32_t data_len = 0;
  Tier tier = Tier::kSmall;
  uint64_t id = 0;  // the file name, unique for the life of the directory
};

// Everything an entry file says about itself, owning its fid (from a scan or the index).
struct EntryMeta {
  std::string fid;
  uint64_t blob_size = 0;
  uint64_t block_offset = 0;
  uint32_t data_len = 0;
  Tier tier = Tier::kSmall;
  uint64_t id = 0;
  std::vector<uint64_t> page_sums;  // xxh3 of each 4 KiB page of the data
  EntryRef ref() const { return {fid, blob_size, block_offset, data_len, tier, id}; }
};

// Bytes of the header: fixed part, fid, page checksum table.
uint64_t EntryHeaderLen(size_t fid_len, uint64_t data_len);
// Where the data starts: right after the header, or at the next page boundary for data of
// format::kAlignedDataMin bytes or more.
uint64_t EntryDataOffset(size_t fid_len, uint64_t data_len);
inline uint64_t EntryFileSize(size_t fid_len, uint64_t data_len) {
  return EntryDataOffset(fid_len, data_len) + data_len;
}

// xxh3 of each 4 KiB page of data, the last one possibly short.
std::vector<uint64_t> PageSums(std::string_view data);
inline uint64_t PageCount(uint64_t data_len) {
  return (data_len + format::kPageSize - 1) / format::kPageSize;
}

// "%016x" of id, and back (false unless exactly 16 lowercase hex digits).
std::string EntryFileName(uint64_t id);
bool ParseEntryFileName(std::string_view name, uint64_t* id);

// "spare-" and EntryFileName(id): the name an evicted entry's file waits under, emptied, to be
// reused (not an entry name: a scan on open removes it).
std::string SpareFileName(uint64_t id);

// A former entry's file to reuse, its blocks kept: dirfd/SpareFileName(id), or with
// entry_name still dirfd/EntryFileName(id) (a deleted blob's entry taken before it was renamed).
// WriteEntryFile sets reused when it wrote the entry into it.
struct SpareFile {
  int dirfd = -1;
  uint64_t id = 0;
  bool entry_name = false;
  bool reused = false;

  std::string name() const;
};

// Renames dirfd/EntryFileName(id) SpareFileName(id) in the same directory, its blocks (and the
// page cache's copy of them) kept for the entry written into it next: emptying it would free
// them (a discard per file on a file system mounted with -o discard) and the next write would
// allocate them again, on fresh pages. On failure the file is left under its entry name.
absl::Status MakeSpare(int dirfd, uint64_t id);

// Creates dirfd/EntryFileName(entry.id) (it must not exist) holding data, whose page checksums
// are sums (PageSums(data)), unsynced and through the page cache (the kernel writes it back
// later, after the volume server's writes that fsyncs wait for). With spare, that file is renamed
// to the entry's name and written over instead of a new one being created, and cut to the
// entry's size if it was longer (when the rename fails, the spare is removed and a file created).
// Returns the bytes it occupies (st_blocks * 512). On failure nothing is left behind, spare
// included.
absl::StatusOr<uint64_t> WriteEntryFile(int dirfd, const EntryRef& entry,
                                        const std::vector<uint64_t>& sums, std::string_view data,
                                        SpareFile* spare = nullptr);

// Opens an entry file for reading. NotFound if it is gone.
absl::StatusOr<int> OpenEntryFile(int dirfd, uint64_t id);

// Copies data bytes [offset, offset + len) of the entry open as fd into dst, checking every
// 4 KiB page the range touches against range_sums (range_sums[i] is the checksum of page
// offset / 4096 + i; the caller keeps them in memory, so the header is not read).
// DataLoss: bad checksum or short file. Anything else: an I/O error, with its errno. On
// failure dst holds garbage.
absl::Status ReadEntryData(int fd, const EntryRef& entry, const uint64_t* range_sums,
                           uint64_t offset, size_t len, char* dst);

// Reads and checks the header of dirfd/EntryFileName(id), whose size is file_size (for the scan
// on open). DataLoss unless it is a complete, self-consistent entry of that id and tier.
absl::StatusOr<EntryMeta> ReadEntryHeader(int dirfd, uint64_t id, Tier tier, uint64_t file_size);

}  // namespace kelp::mount::cache
