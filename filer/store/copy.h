// Copying a filer's namespace from one store to another (`kelp filer.copy`): RocksDB to
// PostgreSQL and back. The key layout is the same on every backend, so this is a scan of the
// source in key order written to the destination in batches, then a second pass comparing a
// digest of both. Leases and open event ranges (the coordinator row, family R) belong to the
// filers running on a store, not to the namespace, and are not copied.
//
// Run it with no filer using either store. Not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

#include "absl/status/statusor.h"
#include "filer/store/kv_store.h"

namespace kelp::filer {

struct CopyOptions {
  // Keys written per batch. Default: 1000.
  size_t batch = 1000;
  // Copy into a store that already holds keys (they are kept unless overwritten).
  // Default: false (refuse).
  bool into_non_empty = false;
  // Progress lines (one per 100,000 keys); may be empty.
  std::function<void(std::string_view)> progress;
};

struct CopyResult {
  uint64_t keys = 0;
  uint64_t bytes = 0;   // keys + values
  uint64_t digest = 0;  // xxHash3 over every (key, value) copied, in key order
};

// Copies every key of from (but those above) into to, then reads to back and checks it
// holds the same keys and values. DataLoss if it does not.
absl::StatusOr<CopyResult> CopyStore(KvStore& from, KvStore& to, const CopyOptions& options);

// Whether a key belongs to the namespace (copied) or to the filers running on a store.
bool CopiedKey(std::string_view key);

}  // namespace kelp::filer
