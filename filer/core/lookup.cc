// Read operations: Lookup, GetAttr, ReadDir (cookie order), ListByName, ResolvePath.
// Reads take no locks: each key is read atomically and a listing works from snapshots of
// bounded size, so memory stays constant however large the directory.
#include <algorithm>
#include <cerrno>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "filer/core/filer_service.h"
#include "filer/core/names.h"
#include "filer/store/keys.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::filer {
namespace {

// Entries read per store scan while listing.
constexpr size_t kListBatch = 1024;

// The attributes of a listing batch's children, by inode; children removed since the scan
// are absent. Children made one after another (tar, cp -r, a build) have nearly consecutive
// inode numbers: then one range scan over their inode records costs far less than a point
// read each (a memtable search each on RocksDB, a round trip each on PostgreSQL), even when
// it steps over a few other inodes. Scattered ones are read one by one.
absl::StatusOr<std::unordered_map<uint64_t, Attr>> ChildAttrs(KvReader& r, const std::vector<DirEntry>& batch) {
  std::unordered_map<uint64_t, Attr> out;
  if (batch.empty()) return out;
  uint64_t lo = UINT64_MAX, hi = 0;
  for (const auto& e : batch) {
    lo = std::min<uint64_t>(lo, e.ino());
    hi = std::max<uint64_t>(hi, e.ino());
  }
  const uint64_t span = hi - lo + 1;  // >= 1: lo <= hi
  if (hi < UINT64_MAX && span <= 4 * batch.size() + 64) {
    std::unordered_set<uint64_t> want;
    for (const auto& e : batch) want.insert(e.ino());
    auto it = r.Scan(keys::InodeKey(lo), keys::InodeKey(hi + 1), span);
    for (; it->Valid(); it->Next()) {
      uint64_t ino = keys::FirstU64(it->key());
      if (!want.count(ino)) continue;
      ASSIGN_OR_RETURN(InodeRecord rec, DecodeInode(ino, it->value()));
      out[ino] = rec.ToAttr();
    }
    RETURN_IF_ERROR(it->status());
    return out;
  }
  for (const auto& e : batch) {
    if (out.count(e.ino())) continue;  // hard links: one inode under several names
    auto v = r.Get(keys::InodeKey(e.ino()));
    if (absl::IsNotFound(v.status())) continue;
    if (!v.ok()) return v.status();
    ASSIGN_OR_RETURN(InodeRecord rec, DecodeInode(e.ino(), *v));
    out[e.ino()] = rec.ToAttr();
  }
  return out;
}

// Hands a batch to fn, with its attributes when asked (children removed meanwhile are left
// out); counts what fn took in *sent. False when fn asked to stop.
absl::StatusOr<bool> Emit(KvReader& r, std::vector<DirEntry>& batch, bool with_attrs,
                          const FilerService::EntryFn& fn, size_t* sent) {
  std::unordered_map<uint64_t, Attr> attrs;
  if (with_attrs) {
    ASSIGN_OR_RETURN(attrs, ChildAttrs(r, batch));
  }
  for (auto& e : batch) {
    if (with_attrs) {
      auto a = attrs.find(e.ino());
      if (a == attrs.end()) continue;
      *e.mutable_attr() = a->second;
    }
    ++*sent;
    if (!fn(std::move(e))) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<Attr> FilerService::Lookup(uint64_t parent, std::string_view name) {
  if (name == "." || name == "..") {
    ASSIGN_OR_RETURN(InodeRecord dir, LoadDir(parent));
    if (name == ".") return dir.ToAttr();
    ASSIGN_OR_RETURN(InodeRecord up, LoadInode(dir.parent));
    return up.ToAttr();
  }
  RETURN_IF_ERROR(ValidateName(name));
  // Only directories have entries, so a hit needs no look at the parent: two reads.
  ASSIGN_OR_RETURN(auto d, LoadDentry(parent, name));
  if (!d) {
    RETURN_IF_ERROR(LoadDir(parent).status());  // ENOENT / ENOTDIR for the parent itself
    return PosixError(ENOENT, StrCat("no entry ", name, " in ", parent));
  }
  auto child = LoadInode(d->ino);
  // Unlinked between the two reads: the name is gone.
  if (ErrnoOf(child.status()) == ENOENT) return PosixError(ENOENT, StrCat("no entry ", name));
  if (!child.ok()) return child.status();
  return child->ToAttr();
}

absl::StatusOr<Attr> FilerService::GetAttr(uint64_t ino) {
  ASSIGN_OR_RETURN(InodeRecord r, LoadInode(ino));
  return r.ToAttr();
}

absl::Status FilerService::ReadDir(uint64_t ino, uint64_t cookie, size_t limit, bool with_attrs,
                                   const EntryFn& fn) {
  RETURN_IF_ERROR(LoadDir(ino).status());
  if (cookie == UINT64_MAX) return absl::OkStatus();
  const std::string end = keys::PrefixEnd(keys::DirIndexPrefix(ino));
  uint64_t next = cookie + 1;
  size_t sent = 0;
  for (;;) {
    size_t want = limit ? std::min(kListBatch, limit - sent) : kListBatch;
    auto it = kv_->Scan(keys::DirIndexKey(ino, next), end, want);
    std::vector<DirEntry> batch;
    for (; it->Valid() && batch.size() < want; it->Next()) {
      uint64_t c = keys::SecondU64(it->key());
      next = c + 1;
      ASSIGN_OR_RETURN(DirIndexValue v, DecodeDirIndex(it->value()));
      DirEntry& e = batch.emplace_back();
      e.set_name(std::move(v.name));
      e.set_ino(v.ino);
      e.set_type(v.type);
      e.set_cookie(c);
    }
    RETURN_IF_ERROR(it->status());
    it.reset();
    const size_t n = batch.size();
    ASSIGN_OR_RETURN(bool more, Emit(rd(), batch, with_attrs, fn, &sent));
    if (!more || n < want || (limit && sent >= limit)) return absl::OkStatus();
  }
}

absl::Status FilerService::ListByName(uint64_t ino, std::string_view start_after, size_t limit,
                                      bool with_attrs, const EntryFn& fn) {
  RETURN_IF_ERROR(LoadDir(ino).status());
  const std::string prefix = keys::DentryPrefix(ino);
  const std::string end = keys::PrefixEnd(prefix);
  // Names hold no NUL, so name + "\0" is the first key after name.
  std::string from = start_after.empty() ? prefix : keys::DentryKey(ino, start_after) + '\0';
  size_t sent = 0;
  for (;;) {
    size_t want = limit ? std::min(kListBatch, limit - sent) : kListBatch;
    auto it = kv_->Scan(from, end, want);
    std::vector<DirEntry> batch;
    for (; it->Valid() && batch.size() < want; it->Next()) {
      std::string_view name = keys::NameOf(it->key());
      from = std::string(it->key()) + '\0';
      ASSIGN_OR_RETURN(DentryValue d, DecodeDentry(it->value()));
      DirEntry& e = batch.emplace_back();
      e.set_name(std::string(name));
      e.set_ino(d.ino);
      e.set_type(d.type);
      e.set_cookie(d.cookie);
    }
    RETURN_IF_ERROR(it->status());
    it.reset();
    const size_t n = batch.size();
    ASSIGN_OR_RETURN(bool more, Emit(rd(), batch, with_attrs, fn, &sent));
    if (!more || n < want || (limit && sent >= limit)) return absl::OkStatus();
  }
}

absl::StatusOr<Attr> FilerService::ResolvePath(std::string_view path) {
  ASSIGN_OR_RETURN(InodeRecord cur, LoadInode(keys::kRootIno));
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t slash = path.find('/', pos);
    if (slash == std::string_view::npos) slash = path.size();
    std::string_view comp = path.substr(pos, slash - pos);
    pos = slash + 1;
    if (comp.empty() || comp == ".") continue;
    if (!cur.IsDir()) return PosixError(ENOTDIR, StrCat("not a directory in path ", path));
    if (comp == "..") return PosixError(EINVAL, "'..' in path");
    RETURN_IF_ERROR(ValidateName(comp));
    ASSIGN_OR_RETURN(auto d, LoadDentry(cur.ino, comp));
    if (!d) return PosixError(ENOENT, StrCat("no such path ", path));
    ASSIGN_OR_RETURN(cur, LoadInode(d->ino));
  }
  return cur.ToAttr();
}

}  // namespace kelp::filer
