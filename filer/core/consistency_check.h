// Offline consistency check of everything the filer keeps in a KvStore (docs/filer-keys.md):
// dentry <-> inode <-> nlink, directory nlink = 2 + subdirectories, the readdir index both
// ways, directory parent pointers and reachability from the root, records (chunk, inline,
// xattr, orphan) of missing inodes, per-inode bookkeeping, the inode counters, the GC queue
// (decodable, well-formed fids, nothing still referenced), the event log (decodable, seqs
// match keys, nothing below the trim floor) and the sequences (every mark above every number
// in use). The one checker: the core's tests and `kelp filer.fsck` (filer/fsck) both run it;
// fsck's repair picks its fix from each problem's kind.
//
// Reads the store through independent scans, so run it on a quiescent store (no filer
// mutating it) for an exact answer. Memory is O(inodes + distinct fids + directory names).
// Thread-safe (pure reads).
#pragma once

#include <functional>
#include <string_view>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "filer/store/kv_store.h"

namespace kelp::filer {

enum class ProblemKind {
  kCorruptRecord,       // key: a record that does not decode (no automatic fix)
  kRootMissing,         // inode 1 is missing
  // Dentries (parent, name, ino).
  kDentryParentMissing,  // the directory holding the entry is missing
  kDentryParentNotDir,   // the "directory" holding the entry is not one
  kDentryChildMissing,   // dangling: the entry names a missing inode
  kDentryType,           // the entry's type differs from the inode's
  kDentryCookie,         // value: the cookie, not below the directory's next_cookie
  kDentryIndex,          // value: the cookie; its readdir index entry is missing or different
  kIndexStale,           // key: a readdir index entry without its dentry
  kDirExtraName,         // a directory's name beyond the one its parent pointer agrees with
  // Inodes (ino).
  kNlink,                // value: the nlink the names say
  kDirParent,            // value: the directory whose entry names this directory
  kDirUnreachable,       // value: where to cut (the top of the chain, or the least ino of a cycle)
  kChunkCount,           // value: chunk records seen
  kJournalCount,         // value: journaled chunk records seen
  kInlineSize,           // value: bytes of inline data stored
  kInlineTooLarge,       // inline data longer than the file (no automatic fix)
  kNotOrphan,            // nlink 0 and no names, but not on the orphan list
  kOrphanLinked,         // on the orphan list but linked
  kUnreachable,          // nlink > 0 but no names (neither linked nor an orphan)
  // Records of missing inodes (ino).
  kRecordsWithoutInode,  // chunk, inline or xattr records of a missing inode
  kOrphanWithoutInode,   // key: orphan mark of a missing inode
  kChunkBadFid,          // key: a chunk record whose fid is malformed (no automatic fix)
  kJournalStray,         // key: journaled bytes no chunk record names
  kJournalMissing,       // key: a journaled chunk record without its bytes (no automatic fix)
  // GC queue, counters, event log, sequences.
  kGcBadEntry,           // key: undecodable entry or malformed fid
  kGcReferenced,         // key: the fid is still referenced by a chunk record
  kCounters,             // value: the number of inodes
  kEventBad,             // key: undecodable event, or its seq differs from its key's
  kEventBelowFloor,      // key: an event below the trim floor
  kSequence,             // name: the sequence; value: the smallest safe mark
};

struct Problem {
  ProblemKind kind = ProblemKind::kCorruptRecord;
  uint64_t ino = 0;
  uint64_t parent = 0;
  std::string name;  // dentry name, or sequence name
  uint64_t value = 0;
  std::string key;   // the raw key concerned, where one record is
  std::string message;
};

struct ConsistencyReport {
  uint64_t inodes = 0;
  uint64_t directories = 0;
  uint64_t dentries = 0;
  uint64_t chunks = 0;
  uint64_t orphans = 0;
  uint64_t xattrs = 0;
  uint64_t gc_entries = 0;
  uint64_t events = 0;
  // The first max_problems problems found; problem_count counts all of them.
  std::vector<Problem> problems;
  uint64_t problem_count = 0;

  bool ok() const { return problem_count == 0; }
  // Counts, then one problem per line.
  std::string Summary() const;
  std::string Counts() const;
};

// max_problems 0 = keep every problem. progress, when set, receives a line every 2 s or so
// while the scans run ("filer.fsck: dentries: 1,234,567 keys (...)").
absl::StatusOr<ConsistencyReport> CheckNamespace(
    KvStore& kv, size_t max_problems = 1000,
    const std::function<void(std::string_view)>& progress = nullptr);

}  // namespace kelp::filer
