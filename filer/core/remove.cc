// Unlink, Rmdir and RemoveTree.
#include <sys/stat.h>

#include <cerrno>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "filer/core/filer_service.h"
#include "filer/core/mutation.h"
#include "filer/core/names.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::filer {

absl::StatusOr<Attr> FilerService::Unlink(uint64_t parent, std::string_view name,
                                          std::vector<FreedBlob>* freed) {
  ASSIGN_OR_RETURN(InodeRecord rec, Transact([&] { return RemoveName(parent, name, false, freed); }));
  return rec.ToAttr();
}

absl::Status FilerService::Rmdir(uint64_t parent, std::string_view name) {
  return Transact([&] { return RemoveName(parent, name, true, nullptr); }).status();
}

absl::StatusOr<InodeRecord> FilerService::RemoveName(uint64_t parent, std::string_view name,
                                                     bool rmdir, std::vector<FreedBlob>* freed) {
  RETURN_IF_ERROR(ValidateName(name));
  for (;;) {
    RETURN_IF_ERROR(LoadDir(parent).status());
    ASSIGN_OR_RETURN(auto seen, LoadDentry(parent, name));
    if (!seen) return PosixError(ENOENT, StrCat("no entry ", name));
    // The child is only known after reading the dentry; lock both, then make sure the name
    // still points at it (else someone renamed over it: go round again).
    auto guard = locks_.Lock({parent, seen->ino});
    ASSIGN_OR_RETURN(auto d, LoadDentry(parent, name));
    if (!d) return PosixError(ENOENT, StrCat("no entry ", name));
    if (d->ino != seen->ino) continue;
    ASSIGN_OR_RETURN(InodeRecord dir, LoadDir(parent));
    ASSIGN_OR_RETURN(InodeRecord child, LoadInode(d->ino));
    if (rmdir) {
      if (!child.IsDir()) return PosixError(ENOTDIR, StrCat(name, " is not a directory"));
      ASSIGN_OR_RETURN(bool empty, DirIsEmpty(child.ino));
      if (!empty) return PosixError(ENOTEMPTY, StrCat(name, " is not empty"));
    } else if (child.IsDir()) {
      return PosixError(EISDIR, StrCat(name, " is a directory"));
    }

    int64_t now = NowNs();
    Mutation m(this, guard);
    RemoveEntry(m, parent, name, *d);
    dir.mtime_ns = dir.ctime_ns = now;
    child.ctime_ns = now;
    if (child.IsDir()) {
      --dir.nlink;
      child.nlink = 0;
    } else {
      --child.nlink;
    }
    PutInode(m, dir);
    if (child.nlink == 0) {
      RETURN_IF_ERROR(DropOrOrphan(m, child));
    } else {
      PutInode(m, child);
    }
    Event removed = MakeEvent(EVENT_DELETE, child, parent, name);
    removed.set_parent_version(dir.version);
    m.Emit(std::move(removed));
    RETURN_IF_ERROR(m.Commit());
    if (freed != nullptr) *freed = m.FreedOf(child.ino);
    return child;
  }
}

std::vector<FilerService::Unlinked> FilerService::UnlinkMany(uint64_t parent, const std::vector<std::string>& names) {
  std::vector<Unlinked> out;
  std::vector<bool> retry;
  absl::Status s = Transact([&] {
    out.assign(names.size(), Unlinked{absl::InternalError("unlink not run"), std::nullopt, {}});
    retry.assign(names.size(), false);
    return UnlinkManyOnce(parent, names, &out, &retry);
  });
  if (!s.ok()) {
    for (Unlinked& u : out) u = Unlinked{s, std::nullopt, {}};
    return out;
  }
  // Without the directory's version: the caller cannot place these among the others, and
  // must read the directory again.
  for (size_t i = 0; i < names.size(); ++i) {
    if (!retry[i]) continue;
    out[i] = Unlinked{absl::InternalError("unlink not run"), std::nullopt, {}};
    out[i].attr = Unlink(parent, names[i], &out[i].freed);
  }
  return out;
}

absl::Status FilerService::UnlinkManyOnce(uint64_t parent, const std::vector<std::string>& names,
                                          std::vector<Unlinked>* out, std::vector<bool>* retry) {
  // What each name pointed at before the locks: the children to lock with the directory.
  std::vector<uint64_t> seen(names.size(), 0);
  std::vector<uint64_t> lock{parent};
  RETURN_IF_ERROR(LoadDir(parent).status());
  for (size_t i = 0; i < names.size(); ++i) {
    if (absl::Status v = ValidateName(names[i]); !v.ok()) {
      (*out)[i].attr = v;
      continue;
    }
    ASSIGN_OR_RETURN(auto d, LoadDentry(parent, names[i]));
    if (!d) {
      (*out)[i].attr = PosixError(ENOENT, StrCat("no entry ", names[i]));
      continue;
    }
    seen[i] = d->ino;
    lock.push_back(d->ino);
  }
  auto guard = locks_.Lock(lock);
  ASSIGN_OR_RETURN(InodeRecord dir, LoadDir(parent));
  const uint64_t version_before = dir.version;
  int64_t now = NowNs();
  Mutation m(this, guard);
  // Children in the order they were first met (two names of one inode share its record).
  std::vector<uint64_t> order;
  std::map<uint64_t, InodeRecord> children;
  std::vector<std::pair<size_t, uint64_t>> removed;  // (name index, child)
  std::set<std::string_view> gone;
  for (size_t i = 0; i < names.size(); ++i) {
    if (seen[i] == 0) continue;
    const std::string& name = names[i];
    std::optional<DentryValue> d;
    if (!gone.count(name)) {
      ASSIGN_OR_RETURN(d, LoadDentry(parent, name));
    }
    if (!d) {
      (*out)[i].attr = PosixError(ENOENT, StrCat("no entry ", name));
      continue;
    }
    if (d->ino != seen[i]) {  // renamed over since: its new child is not locked
      (*retry)[i] = true;
      continue;
    }
    auto it = children.find(d->ino);
    if (it == children.end()) {
      auto child = LoadInode(d->ino);
      if (!child.ok()) {
        (*out)[i].attr = child.status();
        continue;
      }
      if (child->IsDir()) {
        (*out)[i].attr = PosixError(EISDIR, StrCat(name, " is a directory"));
        continue;
      }
      it = children.emplace(d->ino, std::move(*child)).first;
      order.push_back(d->ino);
    }
    InodeRecord& child = it->second;
    RemoveEntry(m, parent, name, *d);
    gone.insert(name);
    child.ctime_ns = now;
    --child.nlink;
    removed.emplace_back(i, d->ino);
  }
  if (removed.empty()) return absl::OkStatus();
  for (uint64_t ino : order) {  // each lost at least one name
    InodeRecord& child = children.at(ino);
    if (child.nlink == 0) {
      RETURN_IF_ERROR(DropOrOrphan(m, child));
    } else {
      PutInode(m, child);
    }
  }
  dir.mtime_ns = dir.ctime_ns = now;
  // One record write for all, with the version separate unlinks would have left.
  dir.version += removed.size() - 1;
  PutInode(m, dir);
  Attr dir_attr = dir.ToAttr();
  for (size_t j = 0; j < removed.size(); ++j) {
    const auto& [i, ino] = removed[j];
    const InodeRecord& child = children.at(ino);
    Event e = MakeEvent(EVENT_DELETE, child, parent, names[i]);
    e.set_parent_version(version_before + j + 1);
    m.Emit(std::move(e));
    (*out)[i].attr = child.ToAttr();
    (*out)[i].parent_attr = dir_attr;
    (*out)[i].parent_attr->set_version(version_before + j + 1);
  }
  RETURN_IF_ERROR(m.Commit());
  // The freed blobs go with the name that took the inode's last link.
  std::set<uint64_t> reported;
  for (auto j = removed.rbegin(); j != removed.rend(); ++j) {
    const auto& [i, ino] = *j;
    if (reported.insert(ino).second) (*out)[i].freed = m.FreedOf(ino);
  }
  return absl::OkStatus();
}

namespace {

// Rounds RemoveTree empties a directory that keeps getting new entries before giving up.
constexpr int kRemoveTreeRounds = 3;
// Deepest nesting RemoveTree follows.
constexpr int kRemoveTreeDepth = 4096;

}  // namespace

absl::Status FilerService::RemoveTree(uint64_t parent, std::string_view name) {
  RETURN_IF_ERROR(ValidateName(name));
  for (int round = 0;; ++round) {
    ASSIGN_OR_RETURN(Attr a, Lookup(parent, name));
    if (!S_ISDIR(a.mode())) return Unlink(parent, name).status();
    RETURN_IF_ERROR(EmptyDir(a.ino(), 0));
    absl::Status s = Rmdir(parent, name);
    if (ErrnoOf(s) != ENOTEMPTY || round + 1 >= kRemoveTreeRounds) return s;
  }
}

absl::Status FilerService::EmptyDir(uint64_t dir, int depth) {
  if (depth > kRemoveTreeDepth) return PosixError(ELOOP, "directory tree too deep");
  for (;;) {
    std::vector<DirEntry> batch;
    RETURN_IF_ERROR(ListByName(dir, "", 1024, false, [&](DirEntry&& e) {
      batch.push_back(std::move(e));
      return true;
    }));
    if (batch.empty()) return absl::OkStatus();
    for (const DirEntry& e : batch) {
      absl::Status s;
      if (S_ISDIR(e.type())) {
        s = EmptyDir(e.ino(), depth + 1);
        if (s.ok()) s = Rmdir(dir, e.name());
      } else {
        s = Unlink(dir, e.name()).status();
      }
      // ENOENT: someone else removed it first; ENOTEMPTY: refilled, the next pass retries.
      if (!s.ok() && ErrnoOf(s) != ENOENT && ErrnoOf(s) != ENOTEMPTY) return s;
    }
  }
}

}  // namespace kelp::filer
