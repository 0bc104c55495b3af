// Read operations: Lookup, GetAttr, ReadDir (cookie order), ListByName, ResolvePath.
// Reads take no locks: each key is read atomically and a listing works from snapshots of
// bounded size, so memory stays constant however large the directory.
#include <cerrno>

#include "filer/core/filer_service.h"
#include "filer/core/names.h"
#include "filer/store/keys.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::filer {
namespace {

// Entries read per store scan while listing.
constexpr size_t kListBatch = 1024;

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
    size_t n = 0;
    for (; it->Valid() && n < want; it->Next(), ++n) {
      uint64_t c = keys::SecondU64(it->key());
      next = c + 1;
      ASSIGN_OR_RETURN(DirIndexValue v, DecodeDirIndex(it->value()));
      DirEntry e;
      e.set_name(std::move(v.name));
      e.set_ino(v.ino);
      e.set_type(v.type);
      e.set_cookie(c);
      if (with_attrs) {
        auto child = LoadInode(v.ino);
        if (ErrnoOf(child.status()) == ENOENT) continue;  // removed since the scan began
        if (!child.ok()) return child.status();
        *e.mutable_attr() = child->ToAttr();
      }
      ++sent;
      if (!fn(std::move(e))) return absl::OkStatus();
    }
    RETURN_IF_ERROR(it->status());
    if (n < want || (limit && sent >= limit)) return absl::OkStatus();
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
    size_t n = 0;
    for (; it->Valid() && n < want; it->Next(), ++n) {
      std::string_view name = keys::NameOf(it->key());
      from = std::string(it->key()) + '\0';
      ASSIGN_OR_RETURN(DentryValue d, DecodeDentry(it->value()));
      DirEntry e;
      e.set_name(std::string(name));
      e.set_ino(d.ino);
      e.set_type(d.type);
      e.set_cookie(d.cookie);
      if (with_attrs) {
        auto child = LoadInode(d.ino);
        if (ErrnoOf(child.status()) == ENOENT) continue;
        if (!child.ok()) return child.status();
        *e.mutable_attr() = child->ToAttr();
      }
      ++sent;
      if (!fn(std::move(e))) return absl::OkStatus();
    }
    RETURN_IF_ERROR(it->status());
    if (n < want || (limit && sent >= limit)) return absl::OkStatus();
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
