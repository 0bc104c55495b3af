// One namespace mutation: the WriteBatch, the events it emits, the blobs it stops
// referencing and the inode-count change, committed together as one atomic write.
//
// Used by one thread, inside the inode locks (`guard`) of the operation that builds it.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "filer/core/lock_table.h"
#include "filer/store/kv_store.h"
#include "proto/filer.pb.h"

namespace kelp::filer {

class FilerService;

class Mutation {
 public:
  Mutation(FilerService* fs, const LockTable::Guard& guard) : fs_(fs), guard_(guard) {}

  WriteBatch& batch() { return batch_; }
  // seq and (if unset) time are filled in at commit.
  void Emit(Event e) { events_.push_back(std::move(e)); }
  // Queues blobs (fid -> whole blob size, 0 if unknown) of inode ino for deletion, but those
  // in still_used: they must no longer be referenced once this commits.
  void Collect(const std::map<std::string, uint64_t>& blobs, uint64_t ino,
               const std::set<std::string>& still_used = {});
  // The blobs of ino that Collect queued, for the answer to the client (whose read cache may
  // drop them) once Commit returned OK.
  std::vector<FreedBlob> FreedOf(uint64_t ino) const;
  // Inodes created (+) or purged (-).
  void AdjustInodes(int64_t delta) { inode_delta_ += delta; }

  // Writes everything, through the operation's transaction (FilerService::Transact) when there
  // is one. sync: the WAL is synced up to this write before it returns (a synced write rather
  // than a write and a Sync(): concurrent synced writes share one WAL fsync; on PostgreSQL a
  // synchronous commit). A conflict (IsConflict) means the whole operation must run again.
  absl::Status Commit(bool sync = false);

 private:
  FilerService* const fs_;
  const LockTable::Guard& guard_;
  WriteBatch batch_;
  std::vector<Event> events_;
  struct Garbage {
    std::vector<std::string> fids;
    std::vector<uint64_t> sizes;  // of the blob of the same index
    uint64_t ino;
  };
  std::vector<Garbage> garbage_;
  int64_t inode_delta_ = 0;
  bool committed_ = false;
};

}  // namespace kelp::filer
