// Link: a real hard link (another dentry to the same inode; nlink counts them).
#include <cerrno>

#include "filer/client/limits.h"
#include "filer/core/filer_service.h"
#include "filer/core/mutation.h"
#include "filer/core/names.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::filer {

absl::StatusOr<Attr> FilerService::Link(uint64_t ino, uint64_t new_parent,
                                        std::string_view new_name) {
  return Transact([&] { return LinkOnce(ino, new_parent, new_name); });
}

absl::StatusOr<Attr> FilerService::LinkOnce(uint64_t ino, uint64_t new_parent,
                                            std::string_view new_name) {
  RETURN_IF_ERROR(ValidateName(new_name));
  auto guard = locks_.Lock({ino, new_parent});
  ASSIGN_OR_RETURN(InodeRecord rec, LoadInode(ino));
  if (rec.IsDir()) return PosixError(EPERM, "hard link to a directory");
  if (rec.nlink == 0) return PosixError(ENOENT, "inode was unlinked");
  if (rec.nlink >= kMaxLinks) return PosixError(EMLINK, "too many links");
  ASSIGN_OR_RETURN(InodeRecord dir, LoadDir(new_parent));
  if (dir.nlink == 0) return PosixError(ENOENT, "directory was removed");
  ASSIGN_OR_RETURN(auto existing, LoadDentry(new_parent, new_name));
  if (existing) return PosixError(EEXIST, StrCat(new_name, " exists"));

  int64_t now = NowNs();
  Mutation m(this, guard);
  AddEntry(m, dir, new_name, rec);
  ++rec.nlink;
  rec.ctime_ns = now;
  dir.mtime_ns = dir.ctime_ns = now;
  PutInode(m, rec);
  PutInode(m, dir);
  Event linked = MakeEvent(EVENT_CREATE, rec, new_parent, new_name);
  linked.set_parent_version(dir.version);
  m.Emit(std::move(linked));
  RETURN_IF_ERROR(m.Commit());
  return rec.ToAttr();
}

}  // namespace kelp::filer
