#include "filer/store/records.h"

#include <sys/stat.h>

#include "filer/store/keys.h"
#include "shared/coding.h"
#include "shared/status.h"

namespace kelp::filer {
namespace {

constexpr uint8_t kInodeFormat = 1;

absl::Status Corrupt(std::string_view what) {
  return absl::DataLossError(std::string("corrupt ") + std::string(what) + " record");
}

}  // namespace

bool InodeRecord::IsDir() const { return S_ISDIR(mode); }
bool InodeRecord::IsReg() const { return S_ISREG(mode); }

Attr InodeRecord::ToAttr() const {
  Attr a;
  a.set_ino(ino);
  a.set_mode(mode);
  a.set_uid(uid);
  a.set_gid(gid);
  a.set_size(size);
  a.set_nlink(nlink);
  a.set_atime_ns(atime_ns);
  a.set_mtime_ns(mtime_ns);
  a.set_ctime_ns(ctime_ns);
  a.set_crtime_ns(crtime_ns);
  a.set_rdev(rdev);
  a.set_generation(generation);
  a.set_symlink_target(symlink_target);
  a.set_parent(parent);
  a.set_version(version);
  a.set_no_xattrs(xattrs_counted && xattr_count == 0);
  return a;
}

std::string EncodeInode(const InodeRecord& r) {
  std::string v;
  v.reserve(64 + r.symlink_target.size());
  v.push_back(static_cast<char>(kInodeFormat));
  PutVarint64(&v, r.mode);
  PutVarint64(&v, r.uid);
  PutVarint64(&v, r.gid);
  PutVarint64(&v, r.size);
  PutVarint64(&v, r.nlink);
  PutVarsint64(&v, r.atime_ns);
  PutVarsint64(&v, r.mtime_ns);
  PutVarsint64(&v, r.ctime_ns);
  PutVarsint64(&v, r.crtime_ns);
  PutVarint64(&v, r.rdev);
  PutVarint64(&v, r.generation);
  PutVarint64(&v, r.parent);
  PutVarint64(&v, r.version);
  PutVarint64(&v, r.chunk_count);
  PutVarint64(&v, r.compacted_chunks);
  PutVarint64(&v, r.inline_size);
  PutVarint64(&v, r.next_cookie);
  PutLengthPrefixed(&v, r.symlink_target);
  // Optional trailing fields: absent in records written before they were kept; each present
  // only with the ones before it.
  const bool more = r.journal_count > 0 || r.last_chunk_seq != 0;
  if (r.xattrs_counted || more) PutVarint64(&v, r.xattrs_counted ? r.xattr_count : 0);
  if (more) PutVarint64(&v, r.journal_count);
  if (r.last_chunk_seq != 0) PutVarint64(&v, r.last_chunk_seq);
  return v;
}

absl::StatusOr<InodeRecord> DecodeInode(uint64_t ino, std::string_view v) {
  if (v.empty() || static_cast<uint8_t>(v[0]) != kInodeFormat) return Corrupt("inode");
  v.remove_prefix(1);
  InodeRecord r;
  r.ino = ino;
  uint64_t mode, uid, gid, nlink;
  std::string_view target;
  bool ok = GetVarint64(&v, &mode) && GetVarint64(&v, &uid) && GetVarint64(&v, &gid) &&
            GetVarint64(&v, &r.size) && GetVarint64(&v, &nlink) &&
            GetVarsint64(&v, &r.atime_ns) && GetVarsint64(&v, &r.mtime_ns) &&
            GetVarsint64(&v, &r.ctime_ns) && GetVarsint64(&v, &r.crtime_ns) &&
            GetVarint64(&v, &r.rdev) && GetVarint64(&v, &r.generation) &&
            GetVarint64(&v, &r.parent) && GetVarint64(&v, &r.version) &&
            GetVarint64(&v, &r.chunk_count) && GetVarint64(&v, &r.compacted_chunks) &&
            GetVarint64(&v, &r.inline_size) && GetVarint64(&v, &r.next_cookie) &&
            GetLengthPrefixed(&v, &target);
  if (!ok) return Corrupt("inode");
  r.xattrs_counted = !v.empty();
  if (r.xattrs_counted && !GetVarint64(&v, &r.xattr_count)) return Corrupt("inode");
  if (!v.empty() && !GetVarint64(&v, &r.journal_count)) return Corrupt("inode");
  if (!v.empty() && !GetVarint64(&v, &r.last_chunk_seq)) return Corrupt("inode");
  r.mode = static_cast<uint32_t>(mode);
  r.uid = static_cast<uint32_t>(uid);
  r.gid = static_cast<uint32_t>(gid);
  r.nlink = static_cast<uint32_t>(nlink);
  r.symlink_target = std::string(target);
  return r;
}

std::string EncodeDentry(const DentryValue& d) {
  std::string v;
  PutVarint64(&v, d.ino);
  PutVarint64(&v, d.type);
  PutVarint64(&v, d.cookie);
  return v;
}

absl::StatusOr<DentryValue> DecodeDentry(std::string_view v) {
  DentryValue d;
  uint64_t type = 0;
  if (!GetVarint64(&v, &d.ino) || !GetVarint64(&v, &type) || !GetVarint64(&v, &d.cookie)) {
    return Corrupt("dentry");
  }
  d.type = static_cast<uint32_t>(type);
  return d;
}

std::string EncodeDirIndex(uint64_t ino, uint32_t type, std::string_view name) {
  std::string v;
  PutVarint64(&v, ino);
  PutVarint64(&v, type);
  v.append(name);
  return v;
}

absl::StatusOr<DirIndexValue> DecodeDirIndex(std::string_view v) {
  DirIndexValue d;
  uint64_t type = 0;
  if (!GetVarint64(&v, &d.ino) || !GetVarint64(&v, &type)) return Corrupt("dir index");
  d.type = static_cast<uint32_t>(type);
  d.name = std::string(v);
  return d;
}

std::string EncodeChunk(const Chunk& c) {
  std::string v;
  PutLengthPrefixed(&v, c.fid());
  PutVarint64(&v, c.offset());
  PutVarint64(&v, c.size());
  PutVarint64(&v, c.blob_offset());
  PutVarint64(&v, c.blob_size());
  return v;
}

absl::StatusOr<Chunk> DecodeChunk(uint64_t seq, std::string_view v) {
  std::string_view fid;
  uint64_t offset, size, blob_offset, blob_size;
  if (!GetLengthPrefixed(&v, &fid) || !GetVarint64(&v, &offset) || !GetVarint64(&v, &size) ||
      !GetVarint64(&v, &blob_offset) || !GetVarint64(&v, &blob_size)) {
    return Corrupt("chunk");
  }
  Chunk c;
  c.set_fid(std::string(fid));
  c.set_offset(offset);
  c.set_size(size);
  c.set_blob_offset(blob_offset);
  c.set_blob_size(blob_size);
  c.set_seq(seq);
  return c;
}

std::string EncodeJournal(int64_t commit_ms, std::string_view data) {
  std::string v;
  PutVarint64(&v, static_cast<uint64_t>(commit_ms));
  v.append(data);
  return v;
}

absl::Status DecodeJournal(std::string_view v, int64_t* commit_ms, std::string_view* data) {
  uint64_t ms = 0;
  if (!GetVarint64(&v, &ms)) return Corrupt("journal");
  *commit_ms = static_cast<int64_t>(ms);
  *data = v;
  return absl::OkStatus();
}

std::string EncodeGc(const GcValue& g) {
  std::string v;
  PutLengthPrefixed(&v, g.fid);
  PutVarint64(&v, g.attempts);
  PutVarint64(&v, g.ino);
  return v;
}

absl::StatusOr<GcValue> DecodeGc(std::string_view v) {
  GcValue g;
  std::string_view fid;
  if (!GetLengthPrefixed(&v, &fid) || !GetVarint64(&v, &g.attempts) || !GetVarint64(&v, &g.ino)) {
    return Corrupt("gc");
  }
  g.fid = std::string(fid);
  return g;
}

std::string EncodeCounter(int64_t delta) {
  std::string v;
  PutVarsint64(&v, delta);
  return v;
}

absl::StatusOr<int64_t> DecodeCounter(std::string_view v) {
  int64_t n = 0;
  if (!GetVarsint64(&v, &n)) return Corrupt("counter");
  return n;
}

std::string EncodeOrphan(int64_t unlink_ns) {
  std::string v;
  PutVarint64(&v, static_cast<uint64_t>(unlink_ns));
  return v;
}

void PutInodeRecord(WriteBatch& b, InodeRecord& rec) {
  ++rec.version;
  b.Put(keys::InodeKey(rec.ino), EncodeInode(rec));
}

void PutEntryRecords(WriteBatch& b, uint64_t dir, std::string_view name, const InodeRecord& rec,
                     uint64_t cookie) {
  uint32_t type = rec.mode & S_IFMT;
  b.Put(keys::DentryKey(dir, name), EncodeDentry({rec.ino, type, cookie}));
  b.Put(keys::DirIndexKey(dir, cookie), EncodeDirIndex(rec.ino, type, name));
}

}  // namespace kelp::filer
