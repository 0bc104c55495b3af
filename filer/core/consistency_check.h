// Offline-style consistency check of the namespace in a KvStore: dentry <-> inode <-> nlink,
// the readdir index, directory parent pointers, chunk/inline/xattr/orphan records of missing
// inodes, per-inode bookkeeping, the inode counters, and GC entries that still have a
// reference (which would delete live data). Shared by tests and `kelp filer.fsck`.
//
// Reads the store through independent scans, so run it on a quiescent store (no filer
// mutating it) for an exact answer. Memory is O(inodes + distinct fids). Thread-safe (pure
// reads).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "filer/store/kv_store.h"

namespace kelp::filer {

struct ConsistencyReport {
  uint64_t inodes = 0;
  uint64_t directories = 0;
  uint64_t dentries = 0;
  uint64_t chunks = 0;
  uint64_t orphans = 0;
  uint64_t xattrs = 0;
  uint64_t gc_entries = 0;
  // One line per problem found (at most max_problems).
  std::vector<std::string> problems;

  bool ok() const { return problems.empty(); }
  std::string Summary() const;
};

absl::StatusOr<ConsistencyReport> CheckNamespace(KvStore& kv, size_t max_problems = 1000);

}  // namespace kelp::filer
