// Client sessions and the files they hold open, kept in the store (key families S, H, U in
// docs/filer-keys.md), so every filer sharing the store sees every open: an unlink through
// one filer of a file opened through another keeps it as an orphan, and a client that moves
// to another filer keeps its session and its opens.
//
// An inode is open while any session holds it; unlinking an open inode makes it an orphan
// (key family O) instead of purging it, and it is purged when the last holder releases it or
// lapses (FilerService::PurgeOrphanIfUnused).
//
// This class reads and writes only through what it is given (the operation's transaction and
// batch: FilerService::rd(), Mutation::batch()), so the caller's transaction covers it.
// Leases are wall-clock deadlines in the store, so every filer agrees when a session lapsed.
//
// Thread-safe. mu_ (the cache of known sessions) is a leaf lock (lock_table.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "filer/core/clock.h"
#include "filer/store/kv_store.h"
#include "shared/mutex.h"

namespace kelp::filer {

class SessionTable {
 public:
  SessionTable(Clock* clock, std::chrono::milliseconds timeout);

  // A fresh, unguessable id.
  std::string NewId();
  // Ids are at most this long and hold no NUL (they sit inside keys).
  static absl::Status ValidateId(std::string_view id);

  // Puts the session's record with a fresh lease.
  void PutSession(WriteBatch& b, std::string_view id, std::string_view client);
  // The session exists and has not lapsed. Cached for a while after it was seen; callers that
  // add opens also Require the session's key in their batch, so a session that lapsed
  // meanwhile fails the write rather than leaving opens behind.
  absl::StatusOr<bool> Exists(KvReader& r, std::string_view id);
  // The same, read from the store now (no cache).
  absl::StatusOr<bool> Alive(KvReader& r, std::string_view id);
  // The session's key (for WriteBatch::Require).
  static std::string Key(std::string_view id);

  // One more open of ino by the session. new_inode: ino was created in this batch (nobody
  // holds it yet, so nothing needs reading).
  absl::Status AddOpen(KvReader& r, WriteBatch& b, std::string_view id, uint64_t ino, bool new_inode = false);
  // `times` opens fewer (at most all the session has); true when the session held ino.
  absl::StatusOr<bool> RemoveOpen(KvReader& r, WriteBatch& b, std::string_view id, uint64_t ino,
                                  uint64_t times = 1);
  // Is ino held by any session (other than `except`, whose opens the caller is dropping)?
  absl::StatusOr<bool> IsOpen(KvReader& r, uint64_t ino, std::string_view except = {});
  // The inodes the session holds.
  absl::StatusOr<std::vector<uint64_t>> OpensOf(KvReader& r, std::string_view id);
  // Deletes every open of the session (OpensOf) from the store.
  void DropOpens(WriteBatch& b, std::string_view id, const std::vector<uint64_t>& inos);
  // Deletes the session's record and forgets it.
  void DropSession(WriteBatch& b, std::string_view id);

  // Sessions whose lease ran out, and how many sessions there are in all.
  struct Census {
    std::vector<std::string> lapsed;
    size_t sessions = 0;
  };
  absl::StatusOr<Census> Scan(KvReader& r);

  int64_t NowMs() const { return clock_->WallNs() / 1'000'000; }

 private:
  Clock* const clock_;
  const int64_t timeout_ms_;
  Mutex mu_;
  // Sessions seen alive, with when (mono ns) that stops counting.
  std::unordered_map<std::string, int64_t> known_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kelp::filer
