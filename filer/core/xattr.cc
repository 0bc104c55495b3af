// Extended attributes: one key per (inode, name); values up to 64 KiB.
#include <cerrno>

#include "filer/client/limits.h"
#include "filer/core/filer_service.h"
#include "filer/core/mutation.h"
#include "filer/store/keys.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::filer {
namespace {

// Linux answers ERANGE for an empty or over-long name (fs/xattr.c).
absl::Status ValidateXattrName(std::string_view name) {
  if (name.empty() || name.size() > kMaxXattrNameLen) {
    return PosixError(ERANGE, "xattr name empty or longer than 255 bytes");
  }
  if (name.find('\0') != std::string_view::npos) return PosixError(EINVAL, "xattr name has NUL");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> FilerService::GetXattr(uint64_t ino, std::string_view name) {
  RETURN_IF_ERROR(ValidateXattrName(name));
  RETURN_IF_ERROR(LoadInode(ino).status());
  auto v = rd().Get(keys::XattrKey(ino, name));
  if (absl::IsNotFound(v.status())) return PosixError(ENODATA, StrCat("no xattr ", name));
  return v;
}

absl::Status FilerService::SetXattr(uint64_t ino, std::string_view name, std::string_view value,
                                    uint32_t flags) {
  RETURN_IF_ERROR(ValidateXattrName(name));
  if ((flags & ~(kXattrCreate | kXattrReplace)) != 0 ||
      flags == (kXattrCreate | kXattrReplace)) {
    return PosixError(EINVAL, StrCat("bad xattr flags ", flags));
  }
  if (value.size() > kMaxXattrValueLen) return PosixError(E2BIG, "xattr value over 64 KiB");
  return Transact([&] { return SetXattrOnce(ino, name, value, flags); });
}

absl::Status FilerService::SetXattrOnce(uint64_t ino, std::string_view name, std::string_view value,
                                        uint32_t flags) {
  auto guard = locks_.Lock({ino});
  ASSIGN_OR_RETURN(InodeRecord rec, LoadInode(ino));
  auto old = rd().Get(keys::XattrKey(ino, name));
  if (!old.ok() && !absl::IsNotFound(old.status())) return old.status();
  if ((flags & kXattrCreate) && old.ok()) return PosixError(EEXIST, StrCat("xattr ", name, " exists"));
  if ((flags & kXattrReplace) && !old.ok()) return PosixError(ENODATA, StrCat("no xattr ", name));
  if (!old.ok()) RETURN_IF_ERROR(CountXattrs(rec, +1));
  Mutation m(this, guard);
  m.batch().Put(keys::XattrKey(ino, name), value);
  rec.ctime_ns = NowNs();
  PutInode(m, rec);
  m.Emit(MakeEvent(EVENT_XATTR, rec, rec.parent, ""));
  return m.Commit();
}

absl::Status FilerService::CountXattrs(InodeRecord& rec, int delta) {
  if (!rec.xattrs_counted) {
    // A record from before the count was kept: count once, under the inode's lock.
    ASSIGN_OR_RETURN(std::vector<std::string> names, ListXattr(rec.ino));
    rec.xattr_count = names.size();
    rec.xattrs_counted = true;
  }
  if (delta < 0 && rec.xattr_count == 0) return absl::OkStatus();
  rec.xattr_count += delta;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> FilerService::ListXattr(uint64_t ino) {
  RETURN_IF_ERROR(LoadInode(ino).status());
  std::vector<std::string> names;
  std::string prefix = keys::XattrPrefix(ino);
  auto it = rd().Scan(prefix, keys::PrefixEnd(prefix));
  for (; it->Valid(); it->Next()) names.emplace_back(keys::NameOf(it->key()));
  RETURN_IF_ERROR(it->status());
  return names;
}

absl::Status FilerService::RemoveXattr(uint64_t ino, std::string_view name) {
  RETURN_IF_ERROR(ValidateXattrName(name));
  return Transact([&] { return RemoveXattrOnce(ino, name); });
}

absl::Status FilerService::RemoveXattrOnce(uint64_t ino, std::string_view name) {
  auto guard = locks_.Lock({ino});
  ASSIGN_OR_RETURN(InodeRecord rec, LoadInode(ino));
  auto old = rd().Get(keys::XattrKey(ino, name));
  if (absl::IsNotFound(old.status())) return PosixError(ENODATA, StrCat("no xattr ", name));
  RETURN_IF_ERROR(old.status());
  RETURN_IF_ERROR(CountXattrs(rec, -1));
  Mutation m(this, guard);
  m.batch().Delete(keys::XattrKey(ino, name));
  rec.ctime_ns = NowNs();
  PutInode(m, rec);
  m.Emit(MakeEvent(EVENT_XATTR, rec, rec.parent, ""));
  return m.Commit();
}

}  // namespace kelp::filer
