// Create (regular files, directories, device nodes, fifos, sockets) and Symlink.
#include <sys/stat.h>

#include <cerrno>

#include "filer/client/limits.h"
#include "filer/core/filer_service.h"
#include "filer/core/mutation.h"
#include "filer/core/names.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::filer {

absl::StatusOr<Attr> FilerService::Create(const CreateArgs& args) { return CreateNode(args, {}); }

absl::StatusOr<Attr> FilerService::Symlink(uint64_t parent, std::string_view name,
                                           std::string_view target, uint32_t uid, uint32_t gid) {
  if (target.empty()) return PosixError(ENOENT, "empty symlink target");
  if (target.size() > kMaxSymlinkLen) return PosixError(ENAMETOOLONG, "symlink target too long");
  if (target.find('\0') != std::string_view::npos) {
    return PosixError(EINVAL, "symlink target contains NUL");
  }
  CreateArgs a;
  a.parent = parent;
  a.name = std::string(name);
  a.mode = S_IFLNK | 0777;
  a.uid = uid;
  a.gid = gid;
  a.exclusive = true;
  return CreateNode(a, target);
}

absl::StatusOr<Attr> FilerService::CreateNode(const CreateArgs& a, std::string_view target) {
  uint64_t existing = 0;
  ASSIGN_OR_RETURN(Attr attr, Transact([&] { return CreateNodeOnce(a, target, &existing); }));
  if (existing == 0) return attr;
  // open(O_CREAT) of an existing file opens it (Open() is a transaction of its own), and
  // O_TRUNC truncates it.
  if (a.open_handle) RETURN_IF_ERROR(Open(a.session, existing));
  ASSIGN_OR_RETURN(attr, GetAttr(existing));
  if (!a.truncate || attr.size() == 0) return attr;
  SetAttrRequest t;
  t.set_ino(existing);
  t.set_valid(SET_ATTR_SIZE);
  t.set_size(0);
  auto truncated = SetAttr(t);
  if (!truncated.ok() && a.open_handle) RETURN_IF_ERROR(Release(a.session, existing));
  return truncated;
}

absl::StatusOr<Attr> FilerService::CreateNodeOnce(const CreateArgs& a, std::string_view target,
                                                  uint64_t* existing_ino) {
  RETURN_IF_ERROR(ValidateName(a.name));
  uint32_t type = a.mode & S_IFMT;
  if (type == 0) type = S_IFREG;
  switch (type) {
    case S_IFREG:
    case S_IFDIR:
    case S_IFIFO:
    case S_IFCHR:
    case S_IFBLK:
    case S_IFSOCK: break;
    case S_IFLNK:
      if (!target.empty()) break;
      [[fallthrough]];
    default: return PosixError(EINVAL, StrCat("cannot create file type ", type >> 12));
  }
  if (a.open_handle) {
    RETURN_IF_ERROR(SessionTable::ValidateId(a.session));
    ASSIGN_OR_RETURN(bool known, sessions_.Exists(rd(), a.session));
    if (!known) return absl::NotFoundError(StrCat("unknown session ", a.session));
  }

  auto guard = locks_.Lock({a.parent});
  ASSIGN_OR_RETURN(InodeRecord dir, LoadDir(a.parent));
  if (dir.nlink == 0) return PosixError(ENOENT, "directory was removed");
  ASSIGN_OR_RETURN(auto existing, LoadDentry(a.parent, a.name));
  if (existing) {
    if (type != S_IFREG || a.exclusive) return PosixError(EEXIST, StrCat(a.name, " exists"));
    if (existing->type == S_IFDIR) return PosixError(EISDIR, StrCat(a.name, " is a directory"));
    *existing_ino = existing->ino;  // opened by CreateNode, outside this transaction
    return Attr();
  }

  ASSIGN_OR_RETURN(uint64_t ino, inode_seq_.Next());
  int64_t now = NowNs();
  InodeRecord r;
  r.ino = ino;
  r.mode = type | (a.mode & 07777);
  r.uid = a.uid;
  r.gid = a.gid;
  r.nlink = type == S_IFDIR ? 2 : 1;
  r.atime_ns = r.mtime_ns = r.ctime_ns = r.crtime_ns = now;
  if (type == S_IFCHR || type == S_IFBLK) r.rdev = a.rdev;
  r.generation = 1;
  r.parent = a.parent;
  r.symlink_target = std::string(target);
  r.size = target.size();

  Mutation m(this, guard);
  AddEntry(m, dir, a.name, r);
  if (type == S_IFDIR) ++dir.nlink;
  dir.mtime_ns = dir.ctime_ns = now;
  PutInode(m, r);
  PutInode(m, dir);
  m.AdjustInodes(1);
  Event created = MakeEvent(EVENT_CREATE, r, a.parent, a.name);
  created.set_parent_version(dir.version);
  m.Emit(std::move(created));
  // The open is part of the create, so an immediate unlink by another client orphans the
  // file rather than purging it; the session must still exist when it commits.
  if (a.open_handle) {
    RETURN_IF_ERROR(sessions_.AddOpen(rd(), m.batch(), a.session, ino, true));
    m.batch().Require(SessionTable::Key(a.session));
  }
  if (auto s = m.Commit(); !s.ok()) {
    if (MissingKeyOf(s)) return absl::NotFoundError(StrCat("unknown session ", a.session));
    return s;
  }
  return r.ToAttr();
}

}  // namespace kelp::filer
