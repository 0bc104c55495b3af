// Journaled chunks: the bytes of small writes an fsync committed with the metadata (one WAL
// sync: docs/mount.md, "Durability") move to blobs in the background, keeping their chunk
// records' seqs, so what a file reads never changes.
#include <map>
#include <vector>

#include "filer/core/filer_service.h"
#include "filer/core/mutation.h"
#include "filer/store/keys.h"
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

absl::StatusOr<uint64_t> FilerService::MoveJournal(int64_t older_than_ms, uint64_t max_bytes) {
  volume::BlobStore* blobs = blobs_.load();
  if (blobs == nullptr) return 0;
  // Gather old enough bytes, an inode at a time, up to max_bytes.
  std::map<uint64_t, std::pair<std::string, std::vector<Piece>>> by_ino;
  uint64_t gathered = 0;
  {
    std::string family = keys::Family(keys::kJournal);
    auto it = kv_->Scan(family, keys::PrefixEnd(family));
    uint64_t current = 0;
    for (; it->Valid(); it->Next()) {
      uint64_t ino = keys::FirstU64(it->key());
      if (ino != current && gathered >= max_bytes) break;
      current = ino;
      int64_t ms;
      std::string_view data;
      if (!DecodeJournal(it->value(), &ms, &data).ok() || ms > older_than_ms) continue;
      auto& [blob, pieces] = by_ino[ino];
      pieces.push_back(Piece{keys::SecondU64(it->key()), blob.size(), data.size()});
      blob.append(data);
      gathered += data.size();
    }
    RETURN_IF_ERROR(it->status());
  }
  uint64_t moved = 0;
  for (auto& [ino, group] : by_ino) {
    auto& [blob, pieces] = group;
    // Durable before any record points at it: the records are what an fsync acknowledged.
    auto fid = blobs->Put(blob, /*fsync=*/true);
    if (!fid.ok()) {
      spdlog::warn("filer: moving {} journaled bytes of inode {} to a blob: {}", blob.size(), ino, fid.status());
      continue;
    }
    // One transaction per inode (a commit through another filer may change it meanwhile).
    auto committed = Transact([&]() -> absl::StatusOr<uint64_t> {
      auto guard = locks_.Lock({ino});
      auto rec = LoadInode(ino);
      Mutation m(this, guard);
      uint64_t n = 0;
      bool used = false;
      if (rec.ok()) {
        for (const Piece& p : pieces) {
          std::string ckey = keys::ChunkKey(ino, p.seq);
          auto v = rd().Get(ckey);
          if (!v.ok()) continue;  // dropped since (truncate, compaction, purge)
          auto c = DecodeChunk(p.seq, *v);
          // A truncate may have shortened it: its bytes are then a prefix of ours.
          if (!c.ok() || !c->fid().empty() || c->size() > p.size) continue;
          c->set_fid(*fid);
          c->set_blob_offset(p.blob_offset);
          c->set_blob_size(blob.size());
          m.batch().Put(ckey, EncodeChunk(*c));
          m.batch().Delete(keys::JournalKey(ino, p.seq));
          --rec->journal_count;
          n += c->size();
          used = true;
        }
      }
      if (used) {
        PutInode(m, *rec);
      } else {
        m.Collect({*fid}, ino);
      }
      RETURN_IF_ERROR(m.Commit());
      return n;
    });
    RETURN_IF_ERROR(committed.status());
    moved += *committed;
  }
  return moved;
}

}  // namespace kelp::filer
