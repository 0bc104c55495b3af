// File content: GetChunks, CommitChunks (append-only, O(new chunks)), WriteInline, Fsync,
// and chunk-list compaction.
#include <sys/stat.h>

#include <cerrno>
#include <map>
#include <set>

#include "filer/client/chunk_intervals.h"
#include "filer/client/limits.h"
#include "filer/core/filer_service.h"
#include "filer/core/mutation.h"
#include "filer/store/keys.h"
#include "shared/file_id.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::filer {
namespace {

// Optimistic reads of a file's chunk list retried before reading under its lock.
constexpr int kOptimisticReads = 4;

absl::Status ValidateChunk(const Chunk& c) {
  if (c.fid().empty()) {  // journaled: the bytes are in the request
    if (c.data().size() != c.size()) return PosixError(EINVAL, "a journaled chunk's data is not its size");
  } else {
    if (!FileId::Parse(c.fid()).ok()) return PosixError(EINVAL, StrCat("bad fid '", c.fid(), "'"));
    if (!c.data().empty()) return PosixError(EINVAL, "a chunk with a fid carries no data");
  }
  if (c.size() == 0) return PosixError(EINVAL, "empty chunk");
  if (c.offset() > kMaxFileSize || c.size() > kMaxFileSize - c.offset()) {
    return PosixError(EFBIG, "chunk beyond the largest file size");
  }
  if (c.blob_size() != 0 && (c.blob_offset() > c.blob_size() ||
                             c.size() > c.blob_size() - c.blob_offset())) {
    return PosixError(EINVAL, "chunk reaches past the end of its blob");
  }
  return absl::OkStatus();
}

absl::Status CheckRegular(const InodeRecord& rec) {
  if (rec.IsDir()) return PosixError(EISDIR, "inode is a directory");
  if (!rec.IsReg()) return PosixError(EINVAL, "inode is not a regular file");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<GetChunksResponse> FilerService::GetChunks(uint64_t ino) {
  // Reads the inode, its inline data and chunk records; the version (bumped in every batch
  // that changes any of them) tells whether they belong together. A journal move keeps the
  // version (the bytes stay the same): a read that raced one misses journal records, and is
  // tried again.
  auto read = [&](bool locked) -> absl::StatusOr<std::optional<GetChunksResponse>> {
    ASSIGN_OR_RETURN(InodeRecord before, LoadInode(ino));
    if (before.IsDir()) return PosixError(EISDIR, "inode is a directory");
    GetChunksResponse resp;
    if (before.inline_size > 0) {
      auto data = rd().Get(keys::InlineKey(ino));
      if (data.ok()) {
        resp.set_inline_data(std::move(*data));
      } else if (!absl::IsNotFound(data.status())) {
        return data.status();
      }
    }
    std::string prefix = keys::ChunkPrefix(ino);
    auto it = rd().Scan(prefix, keys::PrefixEnd(prefix));
    for (; it->Valid(); it->Next()) {
      ASSIGN_OR_RETURN(*resp.add_chunks(), DecodeChunk(keys::SecondU64(it->key()), it->value()));
    }
    RETURN_IF_ERROR(it->status());
    if (before.journal_count > 0) {
      absl::Status s = AttachJournal(ino, &resp);
      if (!locked && absl::IsDataLoss(s)) return std::optional<GetChunksResponse>();
      RETURN_IF_ERROR(s);
    }
    ASSIGN_OR_RETURN(InodeRecord after, LoadInode(ino));
    if (after.version != before.version) return std::optional<GetChunksResponse>();
    *resp.mutable_attr() = before.ToAttr();
    return std::optional<GetChunksResponse>(std::move(resp));
  };
  for (int i = 0; i < kOptimisticReads; ++i) {
    ASSIGN_OR_RETURN(auto r, read(false));
    if (r) return std::move(*r);
  }
  // Under the inode's lock and in one transaction: nothing changes it, whichever filer writes.
  return Transact([&]() -> absl::StatusOr<GetChunksResponse> {
    auto guard = locks_.Lock({ino});
    ASSIGN_OR_RETURN(auto r, read(true));
    if (!r) return absl::InternalError("chunk list changed under its lock");
    return std::move(*r);
  });
}

absl::Status FilerService::AttachJournal(uint64_t ino, GetChunksResponse* resp) {
  std::map<uint64_t, Chunk*> journaled;
  for (Chunk& c : *resp->mutable_chunks()) {
    if (c.fid().empty()) journaled[c.seq()] = &c;
  }
  if (journaled.empty()) return absl::OkStatus();
  std::string prefix = keys::JournalPrefix(ino);
  auto it = kv_->Scan(prefix, keys::PrefixEnd(prefix));
  for (; it->Valid(); it->Next()) {
    auto c = journaled.find(keys::SecondU64(it->key()));
    if (c == journaled.end()) continue;
    int64_t ms;
    std::string_view data;
    RETURN_IF_ERROR(DecodeJournal(it->value(), &ms, &data));
    if (data.size() != c->second->size()) return absl::DataLossError(StrCat("inode ", ino, ": journaled chunk of the wrong size"));
    c->second->set_data(std::string(data));
    journaled.erase(c);
  }
  RETURN_IF_ERROR(it->status());
  if (!journaled.empty()) return absl::DataLossError(StrCat("inode ", ino, ": journaled chunk without its bytes"));
  return absl::OkStatus();
}

absl::StatusOr<CommitChunksResponse> FilerService::CommitChunks(const CommitChunksRequest& req) {
  return CommitChunks(req, req.sync());
}

absl::StatusOr<CommitChunksResponse> FilerService::CommitChunks(const CommitChunksRequest& req, bool sync) {
  uint64_t journaled = 0;
  for (const Chunk& c : req.chunks()) {
    RETURN_IF_ERROR(ValidateChunk(c));
    journaled += c.data().size();
  }
  if (journaled > kMaxJournalCommit) {
    return PosixError(EINVAL, StrCat("a commit journals at most ", kMaxJournalCommit, " bytes"));
  }
  if (req.attrs().valid() & SET_ATTR_SIZE) return PosixError(EINVAL, "a commit's attributes cannot set the size");
  if (req.min_size() > kMaxFileSize) return PosixError(EFBIG, "size too large");
  return Transact([&] { return CommitChunksOnce(req, sync); });
}

absl::StatusOr<CommitChunksResponse> FilerService::CommitChunksOnce(const CommitChunksRequest& req, bool sync) {
  const uint64_t ino = req.ino();
  const size_t n = static_cast<size_t>(req.chunks_size());
  CommitChunksResponse resp;
  {
    auto guard = locks_.Lock({ino});
    ASSIGN_OR_RETURN(InodeRecord rec, LoadInode(ino));
    RETURN_IF_ERROR(CheckRegular(rec));
    uint64_t first = 0;
    if (n > 0) {
      ASSIGN_OR_RETURN(first, chunk_seq_.Next(n));
      // Newer chunks must win over older ones. Another filer's sequence range may be ahead
      // of this one's: then move this one past the inode's newest seq.
      if (first <= rec.last_chunk_seq) {
        RETURN_IF_ERROR(chunk_seq_.RaiseAbove(rec.last_chunk_seq));
        ASSIGN_OR_RETURN(first, chunk_seq_.Next(n));
      }
      if (!rec.xattrs_counted) RETURN_IF_ERROR(CountXattrs(rec, 0));  // the seq trails the count
      rec.last_chunk_seq = first + n - 1;
    }
    Mutation m(this, guard);
    if (req.replace()) RETURN_IF_ERROR(DropContentLocked(m, rec));
    std::vector<Chunk> added;
    added.reserve(n);
    uint64_t end = req.min_size();
    int64_t now = NowNs();
    for (size_t i = 0; i < n; ++i) {
      Chunk c = req.chunks(static_cast<int>(i));
      c.set_seq(first + i);
      if (c.fid().empty()) {
        // Journaled: the bytes go into this batch (and the WAL sync the caller asked for).
        c.set_blob_offset(0);
        c.set_blob_size(c.size());
        m.batch().Put(keys::JournalKey(ino, c.seq()), EncodeJournal(now / 1'000'000, c.data()));
        NoteJournaledLocked(ino, now / 1'000'000);
        c.clear_data();
        if (rec.journal_count == 0 && !rec.xattrs_counted) RETURN_IF_ERROR(CountXattrs(rec, 0));
        ++rec.journal_count;
      }
      m.batch().Put(keys::ChunkKey(ino, c.seq()), EncodeChunk(c));
      end = std::max(end, c.offset() + c.size());
      resp.add_seqs(c.seq());
      added.push_back(std::move(c));
    }
    rec.chunk_count += n;
    rec.size = std::max(rec.size, end);
    rec.mtime_ns = req.mtime_ns() != 0 ? req.mtime_ns() : now;
    rec.ctime_ns = now;
    if (req.has_attrs()) ApplyAttrBits(rec, req.attrs(), now);
    RETURN_IF_ERROR(MaybeCompactLocked(m, rec, added));
    PutInode(m, rec);
    m.Emit(MakeEvent(EVENT_DATA, rec, rec.parent, ""));
    // A synced write, not a write and then a sync: concurrent synced writes share one WAL
    // fsync (RocksDB's write group), so 16 files fsynced at once cost a few device flushes.
    RETURN_IF_ERROR(m.Commit(sync));
    *resp.mutable_attr() = rec.ToAttr();
    for (FreedBlob& b : m.FreedOf(ino)) *resp.add_freed() = std::move(b);
  }
  return resp;
}

absl::Status FilerService::MaybeCompactLocked(Mutation& m, InodeRecord& rec,
                                              const std::vector<Chunk>& added) {
  uint64_t threshold = std::max<uint64_t>(opts_.compact_min_chunks, 2 * rec.compacted_chunks);
  if (rec.chunk_count <= threshold) return absl::OkStatus();
  std::vector<Chunk> all;
  all.reserve(rec.chunk_count);
  std::string prefix = keys::ChunkPrefix(rec.ino);
  auto it = rd().Scan(prefix, keys::PrefixEnd(prefix));
  for (; it->Valid(); it->Next()) {
    ASSIGN_OR_RETURN(all.emplace_back(), DecodeChunk(keys::SecondU64(it->key()), it->value()));
  }
  RETURN_IF_ERROR(it->status());
  all.insert(all.end(), added.begin(), added.end());

  std::set<const Chunk*> visible;
  bool inline_visible = false;
  for (const auto& iv : ResolveVisibleIntervals(all, rec.size, rec.inline_size)) {
    if (iv.source == VisibleInterval::Source::kChunk) visible.insert(iv.chunk);
    if (iv.source == VisibleInterval::Source::kInline) inline_visible = true;
  }
  std::set<std::string> kept;
  std::map<std::string, uint64_t> dropped;
  for (const Chunk& c : all) {
    if (visible.count(&c)) {
      kept.insert(c.fid());
      continue;
    }
    // A Delete after the Put of an added record in the same batch removes it.
    m.batch().Delete(keys::ChunkKey(rec.ino, c.seq()));
    --rec.chunk_count;
    if (c.fid().empty()) {
      m.batch().Delete(keys::JournalKey(rec.ino, c.seq()));
      --rec.journal_count;
    } else {
      dropped.emplace(c.fid(), c.blob_size());
    }
  }
  m.Collect(dropped, rec.ino, kept);
  if (rec.inline_size > 0 && !inline_visible) {
    m.batch().Delete(keys::InlineKey(rec.ino));
    rec.inline_size = 0;
  }
  rec.compacted_chunks = rec.chunk_count;
  return absl::OkStatus();
}

absl::Status FilerService::DropContentLocked(Mutation& m, InodeRecord& rec) {
  std::map<std::string, uint64_t> blobs;
  std::string prefix = keys::ChunkPrefix(rec.ino);
  auto it = rd().Scan(prefix, keys::PrefixEnd(prefix));
  for (; it->Valid(); it->Next()) {
    ASSIGN_OR_RETURN(Chunk c, DecodeChunk(keys::SecondU64(it->key()), it->value()));
    if (c.fid().empty()) {
      m.batch().Delete(keys::JournalKey(rec.ino, c.seq()));
    } else {
      blobs.emplace(c.fid(), c.blob_size());
    }
    m.batch().Delete(it->key());
  }
  RETURN_IF_ERROR(it->status());
  m.Collect(blobs, rec.ino);
  if (rec.inline_size > 0) m.batch().Delete(keys::InlineKey(rec.ino));
  rec.chunk_count = rec.compacted_chunks = 0;
  rec.journal_count = 0;
  rec.inline_size = rec.size = 0;
  return absl::OkStatus();
}

absl::StatusOr<Attr> FilerService::WriteInline(uint64_t ino, std::string_view data,
                                               int64_t mtime_ns, bool sync,
                                               const SetAttrRequest* attrs) {
  if (data.size() > kMaxInlineSize) {
    return PosixError(EINVAL, StrCat("inline data over ", kMaxInlineSize, " bytes"));
  }
  if (attrs != nullptr && (attrs->valid() & SET_ATTR_SIZE)) {
    return PosixError(EINVAL, "a commit's attributes cannot set the size");
  }
  return Transact([&] { return WriteInlineOnce(ino, data, mtime_ns, sync, attrs); });
}

absl::StatusOr<Attr> FilerService::WriteInlineOnce(uint64_t ino, std::string_view data,
                                                   int64_t mtime_ns, bool sync, const SetAttrRequest* attrs) {
  Attr out;
  {
    auto guard = locks_.Lock({ino});
    ASSIGN_OR_RETURN(InodeRecord rec, LoadInode(ino));
    RETURN_IF_ERROR(CheckRegular(rec));
    Mutation m(this, guard);
    RETURN_IF_ERROR(DropContentLocked(m, rec));
    if (!data.empty()) m.batch().Put(keys::InlineKey(ino), data);
    rec.inline_size = rec.size = data.size();
    int64_t now = NowNs();
    rec.mtime_ns = mtime_ns != 0 ? mtime_ns : now;
    rec.ctime_ns = now;
    if (attrs != nullptr) ApplyAttrBits(rec, *attrs, now);
    PutInode(m, rec);
    m.Emit(MakeEvent(EVENT_DATA, rec, rec.parent, ""));
    RETURN_IF_ERROR(m.Commit(sync));
    out = rec.ToAttr();
  }
  return out;
}

absl::Status FilerService::Fsync(uint64_t ino) {
  RETURN_IF_ERROR(LoadInode(ino).status());
  return SyncAll();
}

absl::Status FilerService::SyncAll() { return kv_->Sync(); }

}  // namespace kelp::filer
