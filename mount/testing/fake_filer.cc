#include "mount/testing/fake_filer.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>

#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::mount {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

class FakeFiler::Stream : public EventStream {
 public:
  Stream(FakeFiler* f, uint64_t next) : f_(f), next_(next) {}
  absl::StatusOr<filer::Event> Next() override {
    std::unique_lock lock(f_->mu_);
    while (true) {
      if (cancelled_) return absl::CancelledError("cancelled");
      for (const auto& e : f_->events_) {
        if (e.seq() >= next_) {
          next_ = e.seq() + 1;
          return e;
        }
      }
      f_->events_cv_.wait_for(lock, std::chrono::milliseconds(100));
    }
  }
  void Cancel() override {
    std::lock_guard lock(f_->mu_);
    cancelled_ = true;
    f_->events_cv_.notify_all();
  }

 private:
  FakeFiler* f_;
  uint64_t next_;
  bool cancelled_ = false;
};

FakeFiler::FakeFiler() {
  std::lock_guard lock(mu_);
  Node root;
  root.attr = NewAttr(S_IFDIR | 0755, 0, 0);
  root.attr.set_ino(1);
  root.attr.set_nlink(2);
  root.attr.set_parent(1);
  nodes_.emplace(1, std::move(root));
}

absl::Status FakeFiler::Check() {
  ++calls;
  if (down) return absl::UnavailableError("fake filer is down");
  return absl::OkStatus();
}

Attr FakeFiler::NewAttr(uint32_t mode, uint32_t uid, uint32_t gid) {
  Attr a;
  a.set_ino(next_ino_++);
  a.set_mode(mode);
  a.set_uid(uid);
  a.set_gid(gid);
  a.set_nlink(S_ISDIR(mode) ? 2 : 1);
  int64_t now = NowNs();
  a.set_atime_ns(now);
  a.set_mtime_ns(now);
  a.set_ctime_ns(now);
  a.set_crtime_ns(now);
  a.set_generation(1);
  a.set_version(1);
  a.set_no_xattrs(true);
  return a;
}

FakeFiler::Node* FakeFiler::Find(uint64_t ino) {
  auto it = nodes_.find(ino);
  return it == nodes_.end() ? nullptr : &it->second;
}

absl::StatusOr<FakeFiler::Node*> FakeFiler::Dir(uint64_t ino) {
  Node* n = Find(ino);
  if (!n) return PosixError(ENOENT, "no such directory");
  if (!S_ISDIR(n->attr.mode())) return PosixError(ENOTDIR, "not a directory");
  return n;
}

void FakeFiler::Touch(Node* n, bool mtime) {
  int64_t now = NowNs();
  if (mtime) n->attr.set_mtime_ns(now);
  n->attr.set_ctime_ns(now);
  n->attr.set_version(n->attr.version() + 1);
}

void FakeFiler::AddName(Node* dir, const std::string& name, uint64_t ino) {
  uint64_t cookie = dir->next_cookie++;
  dir->names[name] = {ino, cookie};
  dir->by_cookie[cookie] = name;
}

void FakeFiler::RemoveName(Node* dir, const std::string& name) {
  auto it = dir->names.find(name);
  if (it == dir->names.end()) return;
  dir->by_cookie.erase(it->second.second);
  dir->names.erase(it);
}

void FakeFiler::DropLink(uint64_t ino) {
  Node* n = Find(ino);
  if (!n) return;
  uint32_t nl = n->attr.nlink();
  if (S_ISDIR(n->attr.mode())) nl = 0;
  else if (nl > 0) --nl;
  n->attr.set_nlink(nl);
  Touch(n, false);
  if (nl == 0 && open_[ino] == 0) nodes_.erase(ino);
}

void FakeFiler::Emit(filer::EventKind kind, uint64_t ino, uint64_t parent, const std::string& name,
                     uint64_t new_parent, const std::string& new_name) {
  filer::Event e;
  e.set_seq(next_event_++);
  e.set_kind(kind);
  e.set_ino(ino);
  e.set_parent(parent);
  e.set_name(name);
  e.set_new_parent(new_parent);
  e.set_new_name(new_name);
  if (Node* n = Find(ino)) *e.mutable_attr() = n->attr;
  e.set_time_ns(NowNs());
  events_.push_back(std::move(e));
  if (events_.size() > 10000) events_.pop_front();
  events_cv_.notify_all();
}

bool FakeFiler::HasInode(uint64_t ino) const {
  std::lock_guard lock(mu_);
  return nodes_.count(ino) > 0;
}

absl::StatusOr<Attr> FakeFiler::Lookup(uint64_t parent, std::string_view name) {
  RETURN_IF_ERROR(Check());
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(Node * d, Dir(parent));
  if (name == ".") return d->attr;
  if (name == "..") return Find(d->attr.parent()) ? Find(d->attr.parent())->attr : d->attr;
  auto it = d->names.find(name);
  if (it == d->names.end()) return PosixError(ENOENT, kelp::StrCat("no entry ", name));
  return Find(it->second.first)->attr;
}

absl::StatusOr<Attr> FakeFiler::GetAttr(uint64_t ino) {
  RETURN_IF_ERROR(Check());
  std::lock_guard lock(mu_);
  Node* n = Find(ino);
  if (!n) return PosixError(ENOENT, "no such inode");
  return n->attr;
}

absl::Status FakeFiler::ReadDir(uint64_t ino, uint64_t cookie, uint32_t limit, bool with_attrs,
                                const std::function<bool(filer::DirEntry&&)>& fn) {
  RETURN_IF_ERROR(Check());
  std::vector<filer::DirEntry> out;
  {
    std::lock_guard lock(mu_);
    ASSIGN_OR_RETURN(Node * d, Dir(ino));
    for (auto it = d->by_cookie.upper_bound(cookie); it != d->by_cookie.end(); ++it) {
      if (limit && out.size() >= limit) break;
      auto& [child, c] = d->names.find(it->second)->second;
      Node* n = Find(child);
      filer::DirEntry e;
      e.set_name(it->second);
      e.set_ino(child);
      e.set_type(n->attr.mode() & S_IFMT);
      e.set_cookie(c);
      if (with_attrs) *e.mutable_attr() = n->attr;
      out.push_back(std::move(e));
    }
  }
  for (auto& e : out) {
    if (!fn(std::move(e))) break;
  }
  return absl::OkStatus();
}

absl::StatusOr<Attr> FakeFiler::Create(const filer::CreateRequest& req, Attr* dir_after) {
  RETURN_IF_ERROR(Check());
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(Node * d, Dir(req.parent()));
  if (d->attr.nlink() == 0) return PosixError(ENOENT, "directory removed");
  auto it = d->names.find(req.name());
  uint32_t mode = req.mode();
  if ((mode & S_IFMT) == 0) mode |= S_IFREG;
  if (it != d->names.end()) {
    Node* n = Find(it->second.first);
    if (req.exclusive() || !S_ISREG(mode) || !S_ISREG(n->attr.mode())) return PosixError(EEXIST, "exists");
    if (req.open_handle()) ++open_[n->attr.ino()];
    return n->attr;
  }
  Node n;
  n.attr = NewAttr(mode, req.uid(), req.gid());
  n.attr.set_rdev(req.rdev());
  n.attr.set_parent(req.parent());
  uint64_t ino = n.attr.ino();
  if (S_ISDIR(mode)) d->attr.set_nlink(d->attr.nlink() + 1);
  AddName(d, req.name(), ino);
  Touch(d, true);
  if (dir_after) *dir_after = d->attr;
  Attr a = n.attr;
  nodes_.emplace(ino, std::move(n));
  if (req.open_handle()) ++open_[ino];
  Emit(filer::EVENT_CREATE, ino, req.parent(), req.name());
  return a;
}

absl::StatusOr<Attr> FakeFiler::Symlink(const filer::SymlinkRequest& req, Attr* dir_after) {
  RETURN_IF_ERROR(Check());
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(Node * d, Dir(req.parent()));
  if (d->names.count(req.name())) return PosixError(EEXIST, "exists");
  Node n;
  n.attr = NewAttr(S_IFLNK | 0777, req.uid(), req.gid());
  n.attr.set_symlink_target(req.target());
  n.attr.set_size(req.target().size());
  n.attr.set_parent(req.parent());
  uint64_t ino = n.attr.ino();
  AddName(d, req.name(), ino);
  Touch(d, true);
  if (dir_after) *dir_after = d->attr;
  Attr a = n.attr;
  nodes_.emplace(ino, std::move(n));
  Emit(filer::EVENT_CREATE, ino, req.parent(), req.name());
  return a;
}

absl::StatusOr<Attr> FakeFiler::Link(uint64_t ino, uint64_t new_parent, std::string_view new_name, Attr* dir_after) {
  RETURN_IF_ERROR(Check());
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(Node * d, Dir(new_parent));
  Node* n = Find(ino);
  if (!n) return PosixError(ENOENT, "no such inode");
  if (S_ISDIR(n->attr.mode())) return PosixError(EPERM, "hard link to a directory");
  if (d->names.count(new_name)) return PosixError(EEXIST, "exists");
  AddName(d, std::string(new_name), ino);
  n->attr.set_nlink(n->attr.nlink() + 1);
  Touch(n, false);
  Touch(d, true);
  if (dir_after) *dir_after = d->attr;
  Emit(filer::EVENT_CREATE, ino, new_parent, std::string(new_name));
  return n->attr;
}

absl::StatusOr<Attr> FakeFiler::Unlink(uint64_t parent, std::string_view name, Attr* dir_after) {
  RETURN_IF_ERROR(Check());
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(Node * d, Dir(parent));
  auto it = d->names.find(name);
  if (it == d->names.end()) return PosixError(ENOENT, "no entry");
  uint64_t ino = it->second.first;
  Node* n = Find(ino);
  if (S_ISDIR(n->attr.mode())) return PosixError(EISDIR, "is a directory");
  RemoveName(d, std::string(name));
  Touch(d, true);
  if (dir_after) *dir_after = d->attr;
  Attr before = n->attr;
  DropLink(ino);
  Node* after = Find(ino);
  Attr a = after ? after->attr : before;
  if (!after) a.set_nlink(0);
  Emit(filer::EVENT_DELETE, ino, parent, std::string(name));
  return a;
}

absl::Status FakeFiler::Rmdir(uint64_t parent, std::string_view name, Attr* dir_after) {
  RETURN_IF_ERROR(Check());
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(Node * d, Dir(parent));
  if (name == ".") return PosixError(EINVAL, "rmdir .");
  auto it = d->names.find(name);
  if (it == d->names.end()) return PosixError(ENOENT, "no entry");
  uint64_t ino = it->second.first;
  Node* n = Find(ino);
  if (!S_ISDIR(n->attr.mode())) return PosixError(ENOTDIR, "not a directory");
  if (!n->names.empty()) return PosixError(ENOTEMPTY, "not empty");
  RemoveName(d, std::string(name));
  d->attr.set_nlink(d->attr.nlink() - 1);
  Touch(d, true);
  if (dir_after) *dir_after = d->attr;
  DropLink(ino);
  Emit(filer::EVENT_DELETE, ino, parent, std::string(name));
  return absl::OkStatus();
}

absl::StatusOr<filer::RenameResponse> FakeFiler::Rename(const filer::RenameRequest& req) {
  RETURN_IF_ERROR(Check());
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(Node * from, Dir(req.parent()));
  ASSIGN_OR_RETURN(Node * to, Dir(req.new_parent()));
  auto it = from->names.find(req.name());
  if (it == from->names.end()) return PosixError(ENOENT, "no entry");
  uint64_t ino = it->second.first;
  Node* moved = Find(ino);
  // Not into its own subtree.
  if (S_ISDIR(moved->attr.mode())) {
    for (uint64_t p = req.new_parent();; p = Find(p)->attr.parent()) {
      if (p == ino) return PosixError(EINVAL, "rename into own subtree");
      if (p == 1 || !Find(p)) break;
    }
  }
  auto tit = to->names.find(req.new_name());
  filer::RenameResponse resp;
  if (req.flags() & 2) {  // exchange
    if (tit == to->names.end()) return PosixError(ENOENT, "no target");
    uint64_t other = tit->second.first;
    from->names[req.name()].first = other;
    to->names[req.new_name()].first = ino;
    Find(other)->attr.set_parent(req.parent());
    moved->attr.set_parent(req.new_parent());
    Touch(from, true);
    Touch(to, true);
    Touch(moved, false);
    Touch(Find(other), false);
    *resp.mutable_moved() = moved->attr;
    *resp.mutable_replaced() = Find(other)->attr;
    *resp.mutable_parent_attr() = from->attr;
    *resp.mutable_new_parent_attr() = to->attr;
    Emit(filer::EVENT_RENAME, ino, req.parent(), req.name(), req.new_parent(), req.new_name());
    return resp;
  }
  if (tit != to->names.end()) {
    if (req.flags() & 1) return PosixError(EEXIST, "target exists");
    uint64_t victim = tit->second.first;
    if (victim == ino) return resp;
    Node* v = Find(victim);
    if (S_ISDIR(v->attr.mode()) && !S_ISDIR(moved->attr.mode())) return PosixError(EISDIR, "target is a directory");
    if (!S_ISDIR(v->attr.mode()) && S_ISDIR(moved->attr.mode())) return PosixError(ENOTDIR, "target not a directory");
    if (S_ISDIR(v->attr.mode()) && !v->names.empty()) return PosixError(ENOTEMPTY, "target not empty");
    RemoveName(to, req.new_name());
    if (S_ISDIR(v->attr.mode())) to->attr.set_nlink(to->attr.nlink() - 1);
    Attr va = v->attr;
    DropLink(victim);
    if (Node* vv = Find(victim)) va = vv->attr;
    else va.set_nlink(0);
    *resp.mutable_replaced() = va;
  }
  RemoveName(from, req.name());
  AddName(to, req.new_name(), ino);
  if (S_ISDIR(moved->attr.mode()) && req.parent() != req.new_parent()) {
    from->attr.set_nlink(from->attr.nlink() - 1);
    to->attr.set_nlink(to->attr.nlink() + 1);
  }
  moved->attr.set_parent(req.new_parent());
  Touch(from, true);
  Touch(to, true);
  Touch(moved, false);
  *resp.mutable_moved() = moved->attr;
  *resp.mutable_parent_attr() = from->attr;
  *resp.mutable_new_parent_attr() = to->attr;
  Emit(filer::EVENT_RENAME, ino, req.parent(), req.name(), req.new_parent(), req.new_name());
  return resp;
}

absl::StatusOr<Attr> FakeFiler::SetAttr(const filer::SetAttrRequest& req) {
  RETURN_IF_ERROR(Check());
  std::lock_guard lock(mu_);
  Node* n = Find(req.ino());
  if (!n) return PosixError(ENOENT, "no such inode");
  uint32_t v = req.valid();
  int64_t now = NowNs();
  if (v & filer::SET_ATTR_MODE) n->attr.set_mode((n->attr.mode() & S_IFMT) | (req.mode() & 07777));
  if (v & filer::SET_ATTR_UID) n->attr.set_uid(req.uid());
  if (v & filer::SET_ATTR_GID) n->attr.set_gid(req.gid());
  if (v & filer::SET_ATTR_ATIME) n->attr.set_atime_ns(req.atime_ns());
  if (v & filer::SET_ATTR_ATIME_NOW) n->attr.set_atime_ns(now);
  if (v & filer::SET_ATTR_MTIME) n->attr.set_mtime_ns(req.mtime_ns());
  if (v & filer::SET_ATTR_MTIME_NOW) n->attr.set_mtime_ns(now);
  bool data = false;
  if (v & filer::SET_ATTR_SIZE) {
    if (S_ISDIR(n->attr.mode())) return PosixError(EISDIR, "is a directory");
    uint64_t size = req.size();
    if (size < n->attr.size()) {
      // Cut chunks and inline data at size.
      std::vector<filer::Chunk> kept;
      for (auto c : n->chunks) {
        if (c.offset() >= size) continue;
        if (c.offset() + c.size() > size) c.set_size(size - c.offset());
        kept.push_back(c);
      }
      n->chunks = std::move(kept);
      if (n->inline_data.size() > size) n->inline_data.resize(size);
    }
    n->attr.set_size(size);
    if (!(v & filer::SET_ATTR_MTIME)) n->attr.set_mtime_ns(now);
    data = true;
  }
  n->attr.set_ctime_ns((v & filer::SET_ATTR_CTIME) ? req.ctime_ns() : now);
  n->attr.set_version(n->attr.version() + 1);
  Emit(data ? filer::EVENT_DATA : filer::EVENT_ATTR, req.ino(), n->attr.parent(), "");
  return n->attr;
}

absl::StatusOr<std::string> FakeFiler::GetXattr(uint64_t ino, std::string_view name) {
  RETURN_IF_ERROR(Check());
  std::lock_guard lock(mu_);
  Node* n = Find(ino);
  if (!n) return PosixError(ENOENT, "no such inode");
  auto it = n->xattrs.find(name);
  if (it == n->xattrs.end()) return PosixError(ENODATA, "no such attribute");
  return it->second;
}

absl::Status FakeFiler::SetXattr(uint64_t ino, std::string_view name, std::string_view value, uint32_t flags) {
  RETURN_IF_ERROR(Check());
  std::lock_guard lock(mu_);
  Node* n = Find(ino);
  if (!n) return PosixError(ENOENT, "no such inode");
  bool exists = n->xattrs.count(name) > 0;
  if ((flags & 1) && exists) return PosixError(EEXIST, "attribute exists");
  if ((flags & 2) && !exists) return PosixError(ENODATA, "no such attribute");
  n->xattrs[std::string(name)] = std::string(value);
  n->attr.set_no_xattrs(false);
  Touch(n, false);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> FakeFiler::ListXattr(uint64_t ino) {
  RETURN_IF_ERROR(Check());
  std::lock_guard lock(mu_);
  Node* n = Find(ino);
  if (!n) return PosixError(ENOENT, "no such inode");
  std::vector<std::string> out;
  for (const auto& [k, v] : n->xattrs) out.push_back(k);
  return out;
}

absl::Status FakeFiler::RemoveXattr(uint64_t ino, std::string_view name) {
  RETURN_IF_ERROR(Check());
  std::lock_guard lock(mu_);
  Node* n = Find(ino);
  if (!n) return PosixError(ENOENT, "no such inode");
  auto it = n->xattrs.find(name);
  if (it == n->xattrs.end()) return PosixError(ENODATA, "no such attribute");
  n->xattrs.erase(it);
  n->attr.set_no_xattrs(n->xattrs.empty());
  Touch(n, false);
  return absl::OkStatus();
}

absl::StatusOr<filer::StatFsResponse> FakeFiler::StatFs() {
  RETURN_IF_ERROR(Check());
  filer::StatFsResponse r;
  r.set_block_size(4096);
  r.set_total_blocks(1ull << 30);
  r.set_free_blocks(1ull << 29);
  r.set_total_files(1ull << 30);
  r.set_free_files(1ull << 29);
  r.set_name_max(255);
  return r;
}

absl::StatusOr<filer::GetChunksResponse> FakeFiler::GetChunks(uint64_t ino) {
  RETURN_IF_ERROR(Check());
  std::lock_guard lock(mu_);
  Node* n = Find(ino);
  if (!n) return PosixError(ENOENT, "no such inode");
  filer::GetChunksResponse r;
  *r.mutable_attr() = n->attr;
  for (const auto& c : n->chunks) *r.add_chunks() = c;
  r.set_inline_data(n->inline_data);
  return r;
}

absl::StatusOr<filer::CommitChunksResponse> FakeFiler::CommitChunks(const filer::CommitChunksRequest& req) {
  RETURN_IF_ERROR(Check());
  std::lock_guard lock(mu_);
  Node* n = Find(req.ino());
  if (!n) return PosixError(ENOENT, "no such inode");
  filer::CommitChunksResponse r;
  for (auto c : req.chunks()) {
    c.set_seq(next_seq_++);
    r.add_seqs(c.seq());
    n->chunks.push_back(c);
  }
  n->attr.set_size(std::max<uint64_t>(n->attr.size(), req.min_size()));
  n->attr.set_mtime_ns(req.mtime_ns() ? req.mtime_ns() : NowNs());
  n->attr.set_ctime_ns(NowNs());
  n->attr.set_version(n->attr.version() + 1);
  ++commits;
  if (req.sync()) ++synced_commits;
  *r.mutable_attr() = n->attr;
  Emit(filer::EVENT_DATA, req.ino(), n->attr.parent(), "");
  return r;
}

absl::StatusOr<Attr> FakeFiler::WriteInline(uint64_t ino, std::string_view data, int64_t mtime_ns, bool sync) {
  RETURN_IF_ERROR(Check());
  std::lock_guard lock(mu_);
  Node* n = Find(ino);
  if (!n) return PosixError(ENOENT, "no such inode");
  if (data.size() > 4096) return PosixError(EFBIG, "inline data too large");
  n->inline_data = std::string(data);
  n->chunks.clear();
  n->attr.set_size(data.size());
  n->attr.set_mtime_ns(mtime_ns ? mtime_ns : NowNs());
  n->attr.set_ctime_ns(NowNs());
  n->attr.set_version(n->attr.version() + 1);
  ++inline_writes;
  if (sync) ++synced_commits;
  Emit(filer::EVENT_DATA, ino, n->attr.parent(), "");
  return n->attr;
}

absl::Status FakeFiler::Fsync(uint64_t) {
  RETURN_IF_ERROR(Check());
  ++fsyncs;
  return absl::OkStatus();
}

absl::StatusOr<filer::OpenSessionResponse> FakeFiler::OpenSession(std::string_view client) {
  RETURN_IF_ERROR(Check());
  std::lock_guard lock(mu_);
  filer::OpenSessionResponse r;
  r.set_session(kelp::StrCat("s", sessions_.size() + 1));
  r.set_lease_ms(30000);
  sessions_.insert(r.session());
  return r;
}

absl::Status FakeFiler::KeepAlive(std::string_view, const std::vector<uint64_t>&, bool) { return Check(); }

absl::Status FakeFiler::Open(std::string_view, uint64_t ino) {
  RETURN_IF_ERROR(Check());
  std::lock_guard lock(mu_);
  if (!Find(ino)) return PosixError(ENOENT, "no such inode");
  ++open_[ino];
  return absl::OkStatus();
}

absl::Status FakeFiler::Release(std::string_view, uint64_t ino) {
  RETURN_IF_ERROR(Check());
  std::lock_guard lock(mu_);
  auto it = open_.find(ino);
  if (it == open_.end()) return absl::OkStatus();
  if (--it->second <= 0) {
    open_.erase(it);
    Node* n = Find(ino);
    if (n && n->attr.nlink() == 0) nodes_.erase(ino);
  }
  return absl::OkStatus();
}

absl::StatusOr<cluster::AssignResponse> FakeFiler::Assign(uint32_t count, std::string_view, std::string_view) {
  RETURN_IF_ERROR(Check());
  std::lock_guard lock(mu_);
  cluster::AssignResponse r;
  r.set_fid(kelp::StrCat("1,", next_key_, "00000000"));
  r.set_count(count);
  next_key_ += count;
  r.add_locations()->set_url("127.0.0.1:1");
  return r;
}

absl::StatusOr<cluster::LookupVolumeResponse> FakeFiler::LookupVolume(const std::vector<uint32_t>& ids) {
  RETURN_IF_ERROR(Check());
  cluster::LookupVolumeResponse r;
  for (uint32_t id : ids) {
    auto* v = r.add_volumes();
    v->set_volume_id(id);
    v->add_locations()->set_url("127.0.0.1:1");
  }
  return r;
}

absl::StatusOr<std::unique_ptr<EventStream>> FakeFiler::Subscribe(uint64_t from_seq, std::string_view) {
  RETURN_IF_ERROR(Check());
  std::lock_guard lock(mu_);
  uint64_t next = from_seq == 0 ? next_event_ : from_seq;
  return std::unique_ptr<EventStream>(new Stream(this, next));
}

}  // namespace kelp::mount
