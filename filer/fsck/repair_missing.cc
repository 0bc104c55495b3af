// RepairStage::kMissingInodes: an inode that records still refer to (chunks, inline data,
// xattrs, entries inside it, or the root) comes back, under the entry that names it if
// there is one, else in /lost+found; its type and size are what is left of it.
#include "filer/fsck/repairer.h"

#include <sys/stat.h>

#include <algorithm>

#include <fmt/format.h>

#include "filer/store/keys.h"
#include "shared/status.h"

namespace kelp::filer {
namespace {

const char* TypeName(uint32_t mode) { return S_ISDIR(mode) ? "directory" : "file"; }

}  // namespace

absl::Status Repairer::RecreateInodes(const Problems& todo) {
  std::set<uint64_t> missing;
  for (const Problem* p : todo) {
    missing.insert(p->kind == ProblemKind::kDentryParentMissing ? p->parent : p->ino);
  }
  // Where a dangling entry names a missing inode, the inode comes back under that name;
  // an inode whose entry sits in another missing directory waits for that one first.
  std::map<uint64_t, EntryName> named;
  RETURN_IF_ERROR(FindDanglingEntries(missing, &named));
  bool progress = true;
  while (!missing.empty() && progress) {
    progress = false;
    for (auto it = missing.begin(); it != missing.end();) {
      auto n = named.find(*it);
      if (n != named.end() && missing.count(n->second.first) && n->second.first != *it) {
        ++it;
        continue;
      }
      RETURN_IF_ERROR(Recreate(*it, n == named.end() ? nullptr : &n->second));
      it = missing.erase(it);
      progress = true;
    }
  }
  for (uint64_t ino : missing) RETURN_IF_ERROR(Recreate(ino, nullptr));  // a cycle of missing
  return absl::OkStatus();
}

absl::Status Repairer::FindDanglingEntries(const std::set<uint64_t>& missing,
                                           std::map<uint64_t, EntryName>* named) {
  std::string family = keys::Family(keys::kDentry);
  auto it = kv_.Scan(family, keys::PrefixEnd(family));
  for (; it->Valid(); it->Next()) {
    auto d = DecodeDentry(it->value());
    if (d.ok() && missing.count(d->ino) && !named->count(d->ino)) {
      (*named)[d->ino] = {keys::FirstU64(it->key()), std::string(keys::NameOf(it->key()))};
    }
  }
  return it->status();
}

absl::Status Repairer::Recreate(uint64_t ino, const EntryName* name) {
  if (Exists(keys::InodeKey(ino))) return absl::OkStatus();  // never overwrite a record
  InodeRecord rec;
  rec.ino = ino;
  rec.xattrs_counted = false;  // its xattrs may have survived it
  // What is left of it tells its type and size.
  bool children = false;
  {
    std::string prefix = keys::DirIndexPrefix(ino);
    auto it = kv_.Scan(prefix, keys::PrefixEnd(prefix));
    for (; it->Valid(); it->Next()) {
      children = true;
      rec.next_cookie = std::max(rec.next_cookie, keys::SecondU64(it->key()) + 1);
    }
    RETURN_IF_ERROR(it->status());
    std::string dprefix = keys::DentryPrefix(ino);
    auto d = kv_.Scan(dprefix, keys::PrefixEnd(dprefix), 1);
    children = children || d->Valid();
  }
  {
    std::string prefix = keys::ChunkPrefix(ino);
    auto it = kv_.Scan(prefix, keys::PrefixEnd(prefix));
    for (; it->Valid(); it->Next()) {
      ++rec.chunk_count;
      auto c = DecodeChunk(keys::SecondU64(it->key()), it->value());
      if (c.ok()) rec.size = std::max(rec.size, c->offset() + c->size());
      if (c.ok() && c->fid().empty()) ++rec.journal_count;
    }
    RETURN_IF_ERROR(it->status());
    if (auto f = kv_.Get(keys::InlineKey(ino)); f.ok()) {
      rec.inline_size = f->size();
      rec.size = std::max<uint64_t>(rec.size, f->size());
    }
  }
  uint32_t type = S_IFREG;
  std::optional<InodeRecord> parent;
  if (name) {
    ASSIGN_OR_RETURN(auto d, Dentry(name->first, name->second));
    if (d && d->type != 0) type = d->type;
    ASSIGN_OR_RETURN(parent, Inode(name->first));
    if (parent && !parent->IsDir()) parent.reset();
  }
  if (children || ino == keys::kRootIno) type = S_IFDIR;
  int64_t now = NowNs();
  rec.mode = type | (type == S_IFDIR ? 0700 : 0600);
  rec.nlink = type == S_IFDIR ? 2 : 1;
  rec.atime_ns = rec.mtime_ns = rec.ctime_ns = rec.crtime_ns = now;
  rec.generation = 1;
  WriteBatch b;
  std::string where;
  std::vector<Event> events;
  if (ino == keys::kRootIno) {
    rec.mode = S_IFDIR | 0755;
    rec.parent = keys::kRootIno;
    where = "as the root";
    events.push_back(MakeEvent(EVENT_ATTR, rec, 0, ""));
  } else if (parent) {
    rec.parent = parent->ino;
    where = fmt::format("under its entry {}/{}", name->first, name->second);
    events.push_back(MakeEvent(EVENT_CREATE, rec, parent->ino, name->second));
  } else {
    ASSIGN_OR_RETURN(InodeRecord lf, LostFound());
    ASSIGN_OR_RETURN(std::string n, AddToLostFound(b, lf, rec));
    PutInodeRecord(b, lf);
    where = fmt::format("as /{}/{}", kLostFound, n);
    events.push_back(MakeEvent(EVENT_CREATE, rec, lf.ino, n));
  }
  PutInodeRecord(b, rec);
  RETURN_IF_ERROR(AdjustInodes(b, 1));
  return Commit(b, std::move(events),
                fmt::format("inode {}: recreated as a {} ({} bytes, {} chunks) {}", ino,
                            TypeName(rec.mode), rec.size, rec.chunk_count, where));
}

}  // namespace kelp::filer
