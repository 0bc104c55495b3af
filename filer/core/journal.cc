// Journaled chunks: the bytes of small writes an fsync committed with the metadata (one WAL
// sync: docs/mount.md, "Durability") move to blobs in the background, keeping their chunk
// records' seqs, so what a file reads never changes.
#include <set>
#include <vector>

#include "filer/core/filer_service.h"
#include "filer/core/mutation.h"
#include "filer/store/keys.h"
#include "shared/file_id.h"
#include "shared/log.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::filer {
namespace {

struct Piece {
  uint64_t seq = 0;
  uint64_t blob_offset = 0;
  uint64_t size = 0;
};

}  // namespace

void FilerService::SetBlobStore(volume::BlobStore* blobs) { blobs_.store(blobs); }

void FilerService::NoteJournaledLocked(uint64_t ino, int64_t commit_ms) {
  MutexLock lock(journal_mu_);
  if (journal_oldest_.emplace(ino, commit_ms).second) journal_due_.emplace(commit_ms, ino);
}

absl::Status FilerService::RequeueJournalLocked(uint64_t ino) {
  std::string prefix = keys::JournalPrefix(ino);
  auto it = kv_->Scan(prefix, keys::PrefixEnd(prefix), 1);
  std::optional<int64_t> oldest;
  if (it->Valid()) {
    int64_t ms = 0;
    std::string_view data;
    // A record that does not decode is fsck's to report; it is due at once (and skipped).
    if (!DecodeJournal(it->value(), &ms, &data).ok()) ms = 0;
    oldest = ms;
  }
  RETURN_IF_ERROR(it->status());
  MutexLock lock(journal_mu_);
  if (auto old = journal_oldest_.find(ino); old != journal_oldest_.end()) {
    journal_due_.erase({old->second, ino});
    journal_oldest_.erase(old);
  }
  if (oldest) {
    journal_oldest_[ino] = *oldest;
    journal_due_.emplace(*oldest, ino);
  }
  return absl::OkStatus();
}

absl::Status FilerService::LoadJournalQueue() {
  const std::string family = keys::Family(keys::kJournal);
  const std::string end = keys::PrefixEnd(family);
  std::string from = family;
  // One seek per inode: its first (oldest) J record, then past its prefix.
  while (true) {
    auto it = kv_->Scan(from, end, 1);
    if (!it->Valid()) return it->status();
    uint64_t ino = keys::FirstU64(it->key());
    int64_t ms = 0;
    std::string_view data;
    if (!DecodeJournal(it->value(), &ms, &data).ok()) ms = 0;
    {
      MutexLock lock(journal_mu_);
      if (journal_oldest_.emplace(ino, ms).second) journal_due_.emplace(ms, ino);
    }
    from = keys::PrefixEnd(keys::JournalPrefix(ino));
  }
}

absl::StatusOr<uint64_t> FilerService::MoveJournal(int64_t older_than_ms, uint64_t max_bytes) {
  volume::BlobStore* blobs = blobs_.load();
  if (blobs == nullptr) return 0;
  // A round in three steps: every due inode's bytes uploaded without a sync, one sync of the
  // volumes they went to, then each inode's records pointed at its blob. One device flush per
  // volume and round, where a synced upload per inode made one each (sysbench rndrw with 16
  // threads moves ~60 inodes a second, each flush beside the fsyncs' WAL syncs).
  struct Move {
    uint64_t ino = 0;
    std::vector<Piece> pieces;
    uint64_t blob_size = 0;
    std::string fid;
  };
  std::vector<Move> moves;
  uint64_t gathered = 0, moved = 0;
  absl::Status failed;
  while (gathered < max_bytes && failed.ok()) {
    uint64_t ino;
    {
      MutexLock lock(journal_mu_);
      if (journal_due_.empty() || journal_due_.begin()->first > older_than_ms) break;
      ino = journal_due_.begin()->second;
      // Out of the queue until its records are relinked below, so an inode goes once a round;
      // journal_oldest_ keeps it, so commits meanwhile don't queue it again.
      journal_due_.erase(journal_due_.begin());
    }
    // The inode's due bytes. Seqs grow with time, so its J records in key order are in commit
    // order: the first one too young ends the scan.
    Move m{ino, {}, 0, {}};
    std::string blob;
    {
      auto guard = locks_.Lock({ino});
      std::string prefix = keys::JournalPrefix(ino);
      auto it = kv_->Scan(prefix, keys::PrefixEnd(prefix));
      for (; it->Valid(); it->Next()) {
        int64_t ms;
        std::string_view data;
        if (!DecodeJournal(it->value(), &ms, &data).ok()) continue;  // fsck reports it
        if (ms > older_than_ms ||
            (!m.pieces.empty() && gathered + blob.size() + data.size() > max_bytes))
          break;
        m.pieces.push_back(Piece{keys::SecondU64(it->key()), blob.size(), data.size()});
        blob.append(data);
      }
      failed = it->status();
    }
    gathered += blob.size();
    m.blob_size = blob.size();
    if (failed.ok() && !m.pieces.empty()) {
      absl::StatusOr<std::string> fid = blobs->Put(blob, /*fsync=*/false);
      if (fid.ok()) {
        m.fid = std::move(*fid);
      } else {
        spdlog::warn("filer: moving {} journaled bytes of inode {} to a blob: {}", blob.size(), ino, fid.status());
        failed = fid.status();  // the volume servers are not there: the next round tries again
      }
    }
    moves.push_back(std::move(m));
  }

  // Durable before any record points at them: the records are what an fsync acknowledged.
  std::set<uint32_t> volumes;
  std::vector<std::string> uploaded;
  absl::Status synced;
  for (const Move& m : moves) {
    if (m.fid.empty()) continue;
    uploaded.push_back(m.fid);
    auto id = FileId::Parse(m.fid);
    if (id.ok()) {
      volumes.insert(id->volume_id);
    } else if (synced.ok()) {
      synced = id.status();  // a volume it cannot name, it cannot sync
    }
  }
  if (!uploaded.empty()) {
    if (synced.ok())
      synced = blobs->SyncVolumes(std::vector<uint32_t>(volumes.begin(), volumes.end()));
    if (!synced.ok()) {
      spdlog::warn("filer: syncing the blobs of {} journal moves: {}", uploaded.size(), synced);
      blobs->Discard(uploaded);  // nothing points at them
      for (Move& m : moves) m.fid.clear();
      if (failed.ok()) failed = synced;
    }
  }

  for (const Move& mv : moves) {
    const uint64_t ino = mv.ino;
    if (!mv.fid.empty()) {
      // One transaction per inode (a commit through another filer may change it meanwhile).
      auto committed = Transact([&]() -> absl::StatusOr<uint64_t> {
        auto guard = locks_.Lock({ino});
        auto rec = LoadInode(ino);
        Mutation m(this, guard);
        uint64_t n = 0;
        bool used = false;
        if (rec.ok()) {
          for (const Piece& p : mv.pieces) {
            std::string ckey = keys::ChunkKey(ino, p.seq);
            auto v = rd().Get(ckey);
            if (!v.ok()) continue;  // dropped since (truncate, compaction, purge)
            auto c = DecodeChunk(p.seq, *v);
            // A truncate may have shortened it: its bytes are then a prefix of ours.
            if (!c.ok() || !c->fid().empty() || c->size() > p.size) continue;
            c->set_fid(mv.fid);
            c->set_blob_offset(p.blob_offset);
            c->set_blob_size(mv.blob_size);
            m.batch().Put(ckey, EncodeChunk(*c));
            m.batch().Delete(keys::JournalKey(ino, p.seq));
            --rec->journal_count;
            n += c->size();
            used = true;
          }
        }
        if (used) {
          // The version stays: the file reads the same bytes, so mounts keep their views (a
          // bump made the writer of the file reload its whole chunk list after every move).
          // GetChunks tells a move from a change by the journal records it misses.
          m.batch().Put(keys::InodeKey(ino), EncodeInode(*rec));
        } else {
          m.Collect({{mv.fid, mv.blob_size}}, ino);
        }
        RETURN_IF_ERROR(m.Commit());
        return n;
      });
      if (committed.ok()) {
        moved += *committed;
      } else if (failed.ok()) {
        failed = committed.status();
      }
    }
    // Queued again by what is left. On a store of its own no commit of this inode slips in
    // (its lock is held); on a shared store the coordinator refills the queue from the store
    // every round (RunMaintenance), which catches other filers' commits.
    auto guard = locks_.Lock({ino});
    absl::Status r = RequeueJournalLocked(ino);
    if (failed.ok()) failed = r;
  }
  if (!failed.ok()) return failed;
  return moved;
}

}  // namespace kelp::filer
