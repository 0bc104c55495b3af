#include "filer/core/consistency_check.h"

#include <sys/stat.h>

#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "filer/store/coding.h"
#include "filer/store/keys.h"
#include "filer/store/records.h"
#include "shared/file_id.h"
#include "shared/status.h"

namespace kelp::filer {
namespace {

struct InodeInfo {
  uint32_t mode = 0;
  uint32_t nlink = 0;
  uint64_t parent = 0;
  uint64_t chunk_count = 0;
  uint64_t inline_size = 0;
  uint64_t next_cookie = 0;
  // Observed.
  uint32_t links = 0;
  uint32_t subdirs = 0;
  uint64_t dentry_parent = 0;
  uint64_t chunks_seen = 0;
  bool orphan = false;
};

class Checker {
 public:
  Checker(KvStore& kv, size_t max) : kv_(kv), max_(max) {}

  absl::StatusOr<ConsistencyReport> Run() {
    RETURN_IF_ERROR(ScanInodes());
    RETURN_IF_ERROR(ScanDentries());
    RETURN_IF_ERROR(ScanDirIndex());
    RETURN_IF_ERROR(ScanOrphans());
    RETURN_IF_ERROR(ScanChunks());
    RETURN_IF_ERROR(ScanSimple(keys::kInline, "inline data"));
    RETURN_IF_ERROR(ScanSimple(keys::kXattr, "xattr"));
    RETURN_IF_ERROR(ScanGc());
    RETURN_IF_ERROR(CheckCounters());
    CheckInodes();
    return std::move(r_);
  }

 private:
  template <typename... Args>
  void Problem(fmt::format_string<Args...> f, Args&&... args) {
    if (r_.problems.size() < max_) r_.problems.push_back(fmt::format(f, std::forward<Args>(args)...));
  }

  std::unique_ptr<KvIterator> Family(char f) {
    std::string p = keys::Family(f);
    return kv_.Scan(p, keys::PrefixEnd(p));
  }

  absl::Status ScanInodes() {
    auto it = Family(keys::kInode);
    for (; it->Valid(); it->Next()) {
      uint64_t ino = keys::FirstU64(it->key());
      auto rec = DecodeInode(ino, it->value());
      if (!rec.ok()) {
        Problem("inode {}: {}", ino, rec.status().ToString());
        continue;
      }
      InodeInfo& i = inodes_[ino];
      i.mode = rec->mode;
      i.nlink = rec->nlink;
      i.parent = rec->parent;
      i.chunk_count = rec->chunk_count;
      i.inline_size = rec->inline_size;
      i.next_cookie = rec->next_cookie;
      if (rec->inline_size > rec->size) Problem("inode {}: inline data larger than the file", ino);
      ++r_.inodes;
      if (S_ISDIR(rec->mode)) ++r_.directories;
    }
    RETURN_IF_ERROR(it->status());
    if (!inodes_.count(keys::kRootIno)) Problem("root inode missing");
    return absl::OkStatus();
  }

  absl::Status ScanDentries() {
    auto it = Family(keys::kDentry);
    for (; it->Valid(); it->Next()) {
      ++r_.dentries;
      uint64_t parent = keys::FirstU64(it->key());
      std::string name(keys::NameOf(it->key()));
      auto d = DecodeDentry(it->value());
      if (!d.ok()) {
        Problem("dentry {}/{}: corrupt", parent, name);
        continue;
      }
      auto p = inodes_.find(parent);
      if (p == inodes_.end()) {
        Problem("dentry {}/{}: parent missing", parent, name);
      } else if (!S_ISDIR(p->second.mode)) {
        Problem("dentry {}/{}: parent is not a directory", parent, name);
      } else if (d->cookie >= p->second.next_cookie) {
        Problem("dentry {}/{}: cookie {} not below the directory's next cookie", parent, name,
                d->cookie);
      }
      auto c = inodes_.find(d->ino);
      if (c == inodes_.end()) {
        Problem("dentry {}/{}: inode {} missing", parent, name, d->ino);
        continue;
      }
      InodeInfo& child = c->second;
      if ((child.mode & S_IFMT) != d->type) Problem("dentry {}/{}: type differs from inode", parent, name);
      ++child.links;
      if (S_ISDIR(child.mode)) {
        if (p != inodes_.end()) ++p->second.subdirs;
        if (child.dentry_parent != 0) Problem("directory {} has more than one name", d->ino);
        child.dentry_parent = parent;
      }
      auto k = kv_.Get(keys::DirIndexKey(parent, d->cookie));
      auto kv = k.ok() ? DecodeDirIndex(*k) : absl::StatusOr<DirIndexValue>(k.status());
      if (!kv.ok() || kv->ino != d->ino || kv->name != name) {
        Problem("dentry {}/{}: readdir index entry missing or different", parent, name);
      }
    }
    return it->status();
  }

  absl::Status ScanDirIndex() {
    uint64_t n = 0;
    auto it = Family(keys::kDirIndex);
    for (; it->Valid(); it->Next()) ++n;
    if (n != r_.dentries) Problem("{} readdir index entries for {} dentries", n, r_.dentries);
    return it->status();
  }

  absl::Status ScanOrphans() {
    auto it = Family(keys::kOrphan);
    for (; it->Valid(); it->Next()) {
      ++r_.orphans;
      uint64_t ino = keys::FirstU64(it->key());
      auto i = inodes_.find(ino);
      if (i == inodes_.end()) {
        Problem("orphan {}: inode missing", ino);
      } else {
        i->second.orphan = true;
      }
    }
    return it->status();
  }

  absl::Status ScanChunks() {
    auto it = Family(keys::kChunk);
    for (; it->Valid(); it->Next()) {
      ++r_.chunks;
      uint64_t ino = keys::FirstU64(it->key());
      auto c = DecodeChunk(keys::SecondU64(it->key()), it->value());
      if (!c.ok() || !FileId::Parse(c->fid()).ok()) {
        Problem("chunk {}/{}: corrupt", ino, keys::SecondU64(it->key()));
        continue;
      }
      referenced_.insert(c->fid());
      auto i = inodes_.find(ino);
      if (i == inodes_.end()) {
        Problem("chunk {}/{}: inode missing", ino, c->seq());
      } else {
        ++i->second.chunks_seen;
      }
    }
    return it->status();
  }

  absl::Status ScanSimple(char family, const char* what) {
    auto it = Family(family);
    for (; it->Valid(); it->Next()) {
      uint64_t ino = keys::FirstU64(it->key());
      auto i = inodes_.find(ino);
      if (i == inodes_.end()) {
        Problem("{} of missing inode {}", what, ino);
      } else if (family == keys::kInline && it->value().size() != i->second.inline_size) {
        Problem("inode {}: inline data size differs from the record", ino);
      }
      if (family == keys::kXattr) ++r_.xattrs;
    }
    return it->status();
  }

  absl::Status ScanGc() {
    auto it = Family(keys::kGc);
    for (; it->Valid(); it->Next()) {
      ++r_.gc_entries;
      auto g = DecodeGc(it->value());
      if (!g.ok()) {
        Problem("gc entry corrupt");
      } else if (referenced_.count(g->fid)) {
        Problem("gc entry {} is still referenced by a chunk record", g->fid);
      }
    }
    return it->status();
  }

  absl::Status CheckCounters() {
    int64_t sum = 0;
    auto it = Family(keys::kCounter);
    for (; it->Valid(); it->Next()) {
      std::string_view v = it->value();
      int64_t n = 0;
      if (!GetVarsint64(&v, &n)) Problem("inode counter corrupt");
      sum += n;
    }
    RETURN_IF_ERROR(it->status());
    if (sum != static_cast<int64_t>(r_.inodes)) {
      Problem("inode counters say {} inodes, the store holds {}", sum, r_.inodes);
    }
    return absl::OkStatus();
  }

  void CheckInodes() {
    for (const auto& [ino, i] : inodes_) {
      bool dir = S_ISDIR(i.mode);
      if (i.nlink == 0) {
        if (!i.orphan) Problem("inode {}: nlink 0 but not on the orphan list", ino);
        if (i.links != 0) Problem("inode {}: nlink 0 but {} dentries", ino, i.links);
      } else if (dir) {
        uint32_t names = ino == keys::kRootIno ? 0 : 1;
        if (i.links != names) Problem("directory {}: {} names", ino, i.links);
        if (i.nlink != 2 + i.subdirs) {
          Problem("directory {}: nlink {} but {} subdirectories", ino, i.nlink, i.subdirs);
        }
        uint64_t want = ino == keys::kRootIno ? keys::kRootIno : i.dentry_parent;
        if (i.links == names && i.parent != want) {
          Problem("directory {}: parent pointer {} but entry in {}", ino, i.parent, want);
        }
      } else {
        if (i.nlink != i.links) Problem("inode {}: nlink {} but {} dentries", ino, i.nlink, i.links);
        if (i.orphan) Problem("inode {}: on the orphan list but linked", ino);
      }
      if (i.chunks_seen != i.chunk_count) {
        Problem("inode {}: chunk_count {} but {} chunk records", ino, i.chunk_count, i.chunks_seen);
      }
      if (dir && i.nlink > 0 && !ReachesRoot(ino)) {
        Problem("directory {}: parent pointers do not lead to the root", ino);
      }
    }
  }

  // Follows directory parent pointers to the root, remembering directories known good.
  bool ReachesRoot(uint64_t ino) {
    std::vector<uint64_t> path;
    std::unordered_set<uint64_t> seen;
    for (uint64_t cur = ino;;) {
      if (cur == keys::kRootIno || reaches_root_.count(cur)) break;
      auto it = inodes_.find(cur);
      if (it == inodes_.end() || !seen.insert(cur).second) return false;
      path.push_back(cur);
      cur = it->second.parent;
    }
    reaches_root_.insert(path.begin(), path.end());
    return true;
  }

  KvStore& kv_;
  const size_t max_;
  ConsistencyReport r_;
  std::unordered_map<uint64_t, InodeInfo> inodes_;
  std::unordered_set<std::string> referenced_;
  std::unordered_set<uint64_t> reaches_root_;
};

}  // namespace

std::string ConsistencyReport::Summary() const {
  std::string s = fmt::format(
      "{} inodes ({} directories), {} dentries, {} chunks, {} orphans, {} xattrs, {} gc entries; "
      "{} problems",
      inodes, directories, dentries, chunks, orphans, xattrs, gc_entries, problems.size());
  for (const auto& p : problems) s += "\n  " + p;
  return s;
}

absl::StatusOr<ConsistencyReport> CheckNamespace(KvStore& kv, size_t max_problems) {
  return Checker(kv, max_problems).Run();
}

}  // namespace kelp::filer
