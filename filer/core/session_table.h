// Client sessions and the files they hold open. The table lives in memory only: after a
// filer restart, mounts re-announce their open inodes (KeepAlive with reattach) during the
// orphan grace period (options.h), so no durable state is needed.
//
// An inode is open while any session holds it; unlinking an open inode makes it an orphan
// (key family O) instead of purging it, and it is purged when the last holder releases it or
// lapses (FilerService::PurgeOrphanIfUnused).
//
// Thread-safe. mu_ is a leaf lock (lock_table.h). Callers that need "is it open" to stay true
// while they write hold the inode's stripe: Open/Attach are only called with it held.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "filer/core/clock.h"
#include "shared/mutex.h"

namespace kelp::filer {

class SessionTable {
 public:
  SessionTable(Clock* clock, std::chrono::milliseconds timeout);

  // A new session with a fresh lease.
  std::string Create(std::string_view client);
  bool Exists(std::string_view id) const;
  // Extends the lease. NOT_FOUND for an unknown (lapsed, or pre-restart) session.
  absl::Status Touch(std::string_view id);
  // Creates the session under this id if unknown and drops every open it held (reattach
  // starts from a clean slate; the caller re-adds opens with Open()). Returns the inodes whose
  // last open this dropped.
  std::vector<uint64_t> Reattach(std::string_view id, std::string_view client);

  // Counts one more open of ino by the session. NOT_FOUND for an unknown session.
  absl::Status Open(std::string_view id, uint64_t ino);
  // Counts one open fewer. True when that was the inode's last open in any session. An
  // unknown session or an inode it does not hold is not an error (release after lapse).
  bool Release(std::string_view id, uint64_t ino);
  bool IsOpen(uint64_t ino) const;

  // Drops sessions whose lease ran out; returns the inodes whose last open they held.
  std::vector<uint64_t> Expire();

  size_t sessions() const;

 private:
  struct Session {
    std::string client;
    int64_t deadline_ns = 0;
    std::map<uint64_t, uint32_t> open;  // ino -> opens by this session
  };
  // Drops every open of s; appends inodes whose last open went to *freed.
  void DropOpensLocked(Session& s, std::vector<uint64_t>* freed) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Clock* const clock_;
  const int64_t timeout_ns_;
  mutable Mutex mu_;
  std::unordered_map<std::string, Session> sessions_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<uint64_t, uint32_t> open_count_ ABSL_GUARDED_BY(mu_);
  uint64_t created_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace kelp::filer
