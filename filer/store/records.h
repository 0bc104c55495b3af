// Value encodings of the filer's key families (keys.h; prose spec docs/filer-keys.md).
// Every encoding is versioned or self-delimiting so fields can be appended later.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "filer/store/kv_store.h"
#include "proto/filer.pb.h"

namespace kelp::filer {

// One inode: the attributes the API exposes plus the filer's own bookkeeping.
struct InodeRecord {
  uint64_t ino = 0;
  uint32_t mode = 0;  // with S_IFMT bits
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint64_t size = 0;
  uint32_t nlink = 0;
  int64_t atime_ns = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  int64_t crtime_ns = 0;
  uint64_t rdev = 0;
  uint64_t generation = 0;
  uint64_t parent = 0;   // directories: the one parent; others: the parent of the first link
  uint64_t version = 0;  // bumps on every change of the inode or its chunks
  std::string symlink_target;
  // Bookkeeping, not part of Attr.
  uint64_t chunk_count = 0;       // records under ChunkPrefix(ino)
  uint64_t compacted_chunks = 0;  // chunk_count right after the last compaction
  uint64_t inline_size = 0;       // bytes under InlineKey(ino); 0 = no inline data
  uint64_t next_cookie = 1;       // directories: the readdir cookie the next entry gets
  uint64_t xattr_count = 0;       // records under XattrPrefix(ino), when xattrs_counted
  bool xattrs_counted = true;     // false: a record written before the count was kept
  uint64_t journal_count = 0;     // journaled chunk records (bytes under JournalPrefix(ino))
  // The highest chunk seq ever committed to this inode (0: none, or a record from before it
  // was kept). New chunks get higher seqs even when another filer's sequence range is behind.
  // Stored only after journal_count.
  uint64_t last_chunk_seq = 0;

  bool IsDir() const;
  bool IsReg() const;
  Attr ToAttr() const;
};

std::string EncodeInode(const InodeRecord& r);
// The key's ino is passed in because the value does not repeat it.
absl::StatusOr<InodeRecord> DecodeInode(uint64_t ino, std::string_view v);

// Value of D parent name.
struct DentryValue {
  uint64_t ino = 0;
  uint32_t type = 0;  // S_IFMT bits of the child
  uint64_t cookie = 0;
};
std::string EncodeDentry(const DentryValue& d);
absl::StatusOr<DentryValue> DecodeDentry(std::string_view v);

// Value of K parent cookie: the entry at that readdir position.
struct DirIndexValue {
  uint64_t ino = 0;
  uint32_t type = 0;
  std::string name;
};
std::string EncodeDirIndex(uint64_t ino, uint32_t type, std::string_view name);
absl::StatusOr<DirIndexValue> DecodeDirIndex(std::string_view v);

// Value of C ino seq (the seq is in the key).
// The C value: fid, offset, size, blob_offset, blob_size (a journaled chunk's data is in J).
std::string EncodeChunk(const Chunk& c);
absl::StatusOr<Chunk> DecodeChunk(uint64_t seq, std::string_view v);

// The J value of a journaled chunk: when it was committed (ms since the epoch) and its bytes.
std::string EncodeJournal(int64_t commit_ms, std::string_view data);
absl::Status DecodeJournal(std::string_view v, int64_t* commit_ms, std::string_view* data);

// Value of G due_ms seq: a blob waiting to be deleted from the volume servers.
struct GcValue {
  std::string fid;
  uint64_t attempts = 0;  // failed deletes so far
  uint64_t ino = 0;       // the inode that last referenced it (diagnostics)
};
std::string EncodeGc(const GcValue& g);
absl::StatusOr<GcValue> DecodeGc(std::string_view v);

// Value of N stripe: the change of the inode count made under one lock stripe.
std::string EncodeCounter(int64_t delta);
absl::StatusOr<int64_t> DecodeCounter(std::string_view v);

// Value of O ino: when the inode was unlinked while open (ns since the epoch).
std::string EncodeOrphan(int64_t unlink_ns);

// --- Writes that keep records together ----------------------------------------------------

// Bumps rec.version and puts the inode.
void PutInodeRecord(WriteBatch& b, InodeRecord& rec);
// Puts the entry name -> rec in directory dir at readdir position cookie: the dentry and its
// readdir index entry.
void PutEntryRecords(WriteBatch& b, uint64_t dir, std::string_view name, const InodeRecord& rec,
                     uint64_t cookie);

}  // namespace kelp::filer
