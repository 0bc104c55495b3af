// The repairs of `kelp filer.fsck -fix` (docs/fsck.md): it runs the namespace checker
// (filer/core/consistency_check.h), fixes the problems of the earliest stage that has any,
// and checks again, until nothing fixable is left. Stages, in order:
//   0. sequence marks raised above every number in use;
//   1. inodes that are missing but still referenced (by chunk, inline or xattr records, by
//      entries inside them, or as the root) are recreated;
//   2. entries naming missing inodes, entries inside non-directories and a directory's extra
//      names are dropped; stale readdir index entries, orphan marks of missing inodes, bad or
//      still-referenced GC entries and bad event records are deleted; entry types corrected;
//   3. readdir index entries rebuilt, directory cookie counters raised;
//   4. per inode: nlink recomputed, directory parent pointers, chunk and inline bookkeeping,
//      orphan marks added (nlink 0, no name) or removed (linked); inodes with nlink > 0 and no
//      name are linked into /lost+found as "#<ino>";
//   5. directory cycles cut: one directory of each is moved into /lost+found;
//   6. the inode counters rewritten.
// Nothing that may hold data is deleted: records of a missing inode get the inode back,
// unreachable inodes go to /lost+found (not to the orphan list, which the filer purges), GC
// entries are only ever removed from the queue (at worst a blob leaks). Corrupt records,
// malformed fids and inline data longer than its file are reported, never touched.
// Every repair is one atomic write batch, with events (as the filer writes them) so mounts
// that resume their event stream drop what they cached.
//
// Run it on a store no filer has open. Not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "filer/store/kv_store.h"

namespace kelp::filer {

// Name of the directory under the root that receives unreachable inodes.
inline constexpr std::string_view kLostFound = "lost+found";

struct RepairResult {
  uint64_t fixes = 0;   // write batches applied
  uint64_t rounds = 0;  // check + fix rounds
};

// log receives one line per repair.
absl::StatusOr<RepairResult> RepairNamespace(KvStore& kv,
                                             const std::function<void(std::string_view)>& log);

}  // namespace kelp::filer
