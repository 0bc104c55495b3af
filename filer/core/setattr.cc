// SetAttr, including truncate. Shrinking drops chunk records past the new end, trims the one
// that straddles it, and queues blobs no record references any more for GC, so growing the
// file again reads zeros there.
#include <sys/stat.h>

#include <cerrno>
#include <map>
#include <set>

#include "filer/client/limits.h"
#include "filer/client/set_attr.h"
#include "filer/core/filer_service.h"
#include "filer/core/mutation.h"
#include "filer/store/keys.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::filer {
namespace {

bool Has(uint32_t valid, SetAttrBits bit) { return (valid & bit) != 0; }

}  // namespace

absl::StatusOr<Attr> FilerService::SetAttr(const SetAttrRequest& req) {
  return Transact([&] { return SetAttrOnce(req); });
}

absl::StatusOr<Attr> FilerService::SetAttrOnce(const SetAttrRequest& req) {
  const uint32_t valid = req.valid();
  auto guard = locks_.Lock({req.ino()});
  ASSIGN_OR_RETURN(InodeRecord rec, LoadInode(req.ino()));
  int64_t now = NowNs();
  Mutation m(this, guard);
  bool data_changed = false;

  if (Has(valid, SET_ATTR_SIZE)) {
    if (rec.IsDir()) return PosixError(EISDIR, "truncate of a directory");
    if (!rec.IsReg()) return PosixError(EINVAL, "truncate of a special file");
    if (req.size() > kMaxFileSize) return PosixError(EFBIG, "size too large");
    data_changed = req.size() != rec.size;
    RETURN_IF_ERROR(TruncateLocked(m, rec, req.size()));
    rec.mtime_ns = now;
  }
  ApplyAttrBits(rec, req, now);

  PutInode(m, rec);
  m.Emit(MakeEvent(data_changed ? EVENT_DATA : EVENT_ATTR, rec, rec.parent, ""));
  RETURN_IF_ERROR(m.Commit());
  return rec.ToAttr();
}

void FilerService::ApplyAttrBits(InodeRecord& rec, const SetAttrRequest& req, int64_t now) {
  Attr a = rec.ToAttr();
  ApplySetAttr(req, now, &a);
  rec.mode = a.mode();
  rec.uid = a.uid();
  rec.gid = a.gid();
  rec.atime_ns = a.atime_ns();
  rec.mtime_ns = a.mtime_ns();
  rec.ctime_ns = a.ctime_ns();
}

absl::Status FilerService::TruncateLocked(Mutation& m, InodeRecord& rec, uint64_t size) {
  if (size >= rec.size) {
    // No record reaches past the old size (commits raise the size to their end), so the
    // new range is a hole.
    rec.size = size;
    return absl::OkStatus();
  }
  std::set<std::string> kept;
  std::map<std::string, uint64_t> dropped;
  std::string prefix = keys::ChunkPrefix(rec.ino);
  auto it = rd().Scan(prefix, keys::PrefixEnd(prefix));
  for (; it->Valid(); it->Next()) {
    ASSIGN_OR_RETURN(Chunk c, DecodeChunk(keys::SecondU64(it->key()), it->value()));
    const bool journaled = c.fid().empty();
    if (c.offset() >= size) {
      m.batch().Delete(it->key());
      --rec.chunk_count;
      if (journaled) {
        m.batch().Delete(keys::JournalKey(rec.ino, c.seq()));
        --rec.journal_count;
      } else {
        dropped.emplace(c.fid(), c.blob_size());
      }
    } else if (c.offset() + c.size() > size) {
      c.set_size(size - c.offset());
      if (journaled) {
        // The bytes shrink with the record.
        std::string jkey = keys::JournalKey(rec.ino, c.seq());
        ASSIGN_OR_RETURN(std::string jv, rd().Get(jkey));
        int64_t ms;
        std::string_view data;
        RETURN_IF_ERROR(DecodeJournal(jv, &ms, &data));
        if (data.size() < c.size()) return absl::DataLossError("journaled chunk shorter than its record");
        m.batch().Put(jkey, EncodeJournal(ms, data.substr(0, c.size())));
        c.set_blob_size(c.size());
      }
      m.batch().Put(it->key(), EncodeChunk(c));
      kept.insert(c.fid());
    } else {
      kept.insert(c.fid());
    }
  }
  RETURN_IF_ERROR(it->status());
  m.Collect(dropped, rec.ino, kept);
  rec.compacted_chunks = std::min(rec.compacted_chunks, rec.chunk_count);

  if (rec.inline_size > size) {
    if (size == 0) {
      m.batch().Delete(keys::InlineKey(rec.ino));
    } else {
      ASSIGN_OR_RETURN(std::string data, rd().Get(keys::InlineKey(rec.ino)));
      data.resize(size);
      m.batch().Put(keys::InlineKey(rec.ino), data);
    }
    rec.inline_size = size;
  }
  rec.size = size;
  return absl::OkStatus();
}

}  // namespace kelp::filer
