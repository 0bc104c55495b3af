// `kelp filer.fsck`: checks a stopped filer's store (filer/core/consistency_check.h), with
// -fix repairs what is safe (repair.h), and with volume servers named also checks that every
// chunk's blob still exists (blob_check.h). docs/fsck.md is the user's guide.
//
// Not thread-safe: one run at a time per store (the store's lock enforces it across processes).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "filer/store/kv_store.h"
#include "filer/store/open_store.h"

namespace kelp::filer {

struct FsckOptions {
  // The filer's data directory (`kelp filer -dir`), a `kelp server -dir`, or the RocksDB
  // directory itself.
  std::string dir;
  // The store, as `kelp filer -store=...` names it; for rocksdb, found under dir.
  StoreOptions store;
  // Repair what is safe.
  bool fix = false;
  // Check chunk blobs against these volume servers ("host:port" or "host:port.grpcPort"),
  // and look there for leaked blobs. Empty: no blob check.
  std::vector<std::string> volume_servers;
  // Progress lines too.
  bool verbose = false;
  // Receives a progress line every 2 s or so while the store is scanned (a short check says
  // nothing). kelp filer.fsck writes them to stderr. Empty: none.
  std::function<void(std::string_view)> progress;
};

// Exit codes of `kelp filer.fsck`.
inline constexpr int kFsckClean = 0;     // no problem (with -fix: none left)
inline constexpr int kFsckProblems = 1;  // problems found (with -fix: some left), or the check could not run
inline constexpr int kFsckUsage = 2;     // bad flags

// The RocksDB directory for dir: <dir>/meta, <dir>/filer/meta or dir itself, whichever holds
// a store. NotFound with one line otherwise (fsck never creates a store).
absl::StatusOr<std::string> FindFilerStore(const std::string& dir);

// Opens the store at a path FindFilerStore returned. FailedPrecondition with one line naming
// the process when another process (a running filer) holds it.
absl::StatusOr<std::unique_ptr<KvStore>> OpenStoreForFsck(const std::string& store_dir);
// Opens the store o names (rocksdb: under dir, through the two functions above; postgres:
// refused while a filer holds the coordinator lease). *where says which store it is.
absl::StatusOr<std::unique_ptr<KvStore>> OpenOfflineStore(const StoreOptions& o, const std::string& dir,
                                                          std::string* where);

// Runs the whole check, writing report lines to out; returns an exit code above.
int RunFsck(const FsckOptions& options, const std::function<void(std::string_view)>& out);

}  // namespace kelp::filer
