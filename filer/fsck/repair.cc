#include "filer/fsck/repair.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "filer/core/consistency_check.h"
#include "filer/store/coding.h"
#include "filer/store/keys.h"
#include "filer/store/records.h"
#include "filer/store/sequence.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::filer {
namespace {

// Problems examined per round; a store with more fixes them over several rounds.
constexpr size_t kProblemsPerRound = 100'000;
constexpr int kMaxRounds = 64;
constexpr int kStages = 7;
// Event seqs reserved per persisted mark (as the filer's event log does).
constexpr uint64_t kEventSeqStep = 16384;

int StageOf(ProblemKind k) {
  switch (k) {
    case ProblemKind::kSequence:
      return 0;
    case ProblemKind::kRootMissing:
    case ProblemKind::kDentryParentMissing:
    case ProblemKind::kRecordsWithoutInode:
      return 1;
    case ProblemKind::kDentryParentNotDir:
    case ProblemKind::kDentryChildMissing:
    case ProblemKind::kDentryType:
    case ProblemKind::kIndexStale:
    case ProblemKind::kDirExtraName:
    case ProblemKind::kJournalStray:
    case ProblemKind::kOrphanWithoutInode:
    case ProblemKind::kGcBadEntry:
    case ProblemKind::kGcReferenced:
    case ProblemKind::kEventBad:
    case ProblemKind::kEventBelowFloor:
      return 2;
    case ProblemKind::kDentryCookie:
    case ProblemKind::kDentryIndex:
      return 3;
    case ProblemKind::kNlink:
    case ProblemKind::kDirParent:
    case ProblemKind::kChunkCount:
    case ProblemKind::kJournalCount:
    case ProblemKind::kInlineSize:
    case ProblemKind::kNotOrphan:
    case ProblemKind::kOrphanLinked:
    case ProblemKind::kUnreachable:
      return 4;
    case ProblemKind::kDirUnreachable:
      return 5;
    case ProblemKind::kCounters:
      return 6;
    case ProblemKind::kCorruptRecord:
    case ProblemKind::kInlineTooLarge:
    case ProblemKind::kChunkBadFid:
    case ProblemKind::kJournalMissing:
      return -1;
  }
  return -1;
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

const char* TypeName(uint32_t mode) { return S_ISDIR(mode) ? "directory" : "file"; }

class Repairer {
 public:
  Repairer(KvStore& kv, const std::function<void(std::string_view)>& log)
      : kv_(kv),
        log_(log),
        event_seq_(&kv, keys::kEventSeq, kEventSeqStep),
        inode_seq_(&kv, keys::kInodeSeq, 1) {}

  absl::StatusOr<RepairResult> Run() {
    RepairResult result;
    std::set<int> stuck;  // stages whose fixes changed nothing: not tried again
    for (int round = 0; round < kMaxRounds; ++round) {
      ASSIGN_OR_RETURN(ConsistencyReport report, CheckNamespace(kv_, kProblemsPerRound));
      int stage = kStages;
      for (const Problem& p : report.problems) {
        int s = StageOf(p.kind);
        if (s >= 0 && !stuck.count(s)) stage = std::min(stage, s);
      }
      if (stage == kStages) break;
      ++result.rounds;
      uint64_t before = fixes_;
      std::vector<const Problem*> todo;
      for (const Problem& p : report.problems) {
        if (StageOf(p.kind) == stage) todo.push_back(&p);
      }
      RETURN_IF_ERROR(FixStage(stage, todo, report));
      if (fixes_ == before) stuck.insert(stage);
    }
    RETURN_IF_ERROR(kv_.Sync());
    result.fixes = fixes_;
    return result;
  }

 private:
  absl::Status FixStage(int stage, const std::vector<const Problem*>& todo,
                        const ConsistencyReport& report) {
    switch (stage) {
      case 0:
        for (const Problem* p : todo) RETURN_IF_ERROR(RaiseSequence(*p));
        return absl::OkStatus();
      case 1:
        return RecreateInodes(todo);
      case 2:
        for (const Problem* p : todo) RETURN_IF_ERROR(FixRecord(*p));
        return absl::OkStatus();
      case 3:
        return FixIndex(todo);
      case 4:
        return FixInodes(todo);
      case 5:
        return CutCycles(todo);
      case 6:
        return RewriteCounters(report.inodes);
    }
    return absl::OkStatus();
  }

  // --- Store helpers ------------------------------------------------------------------

  absl::StatusOr<std::optional<InodeRecord>> Inode(uint64_t ino) {
    auto v = kv_.Get(keys::InodeKey(ino));
    if (absl::IsNotFound(v.status())) return std::optional<InodeRecord>();
    if (!v.ok()) return v.status();
    ASSIGN_OR_RETURN(InodeRecord r, DecodeInode(ino, *v));
    return std::optional<InodeRecord>(std::move(r));
  }
  absl::StatusOr<std::optional<DentryValue>> Dentry(uint64_t parent, std::string_view name) {
    auto v = kv_.Get(keys::DentryKey(parent, name));
    if (absl::IsNotFound(v.status())) return std::optional<DentryValue>();
    if (!v.ok()) return v.status();
    ASSIGN_OR_RETURN(DentryValue d, DecodeDentry(*v));
    return std::optional<DentryValue>(d);
  }
  bool Exists(std::string_view key) { return kv_.Get(key).ok(); }
  absl::StatusOr<bool> HasEntries(uint64_t dir) {
    std::string prefix = keys::DentryPrefix(dir);
    auto it = kv_.Scan(prefix, keys::PrefixEnd(prefix), 1);
    RETURN_IF_ERROR(it->status());
    return it->Valid();
  }

  void PutInode(WriteBatch& b, InodeRecord& rec) {
    ++rec.version;
    b.Put(keys::InodeKey(rec.ino), EncodeInode(rec));
  }
  void PutEntry(WriteBatch& b, uint64_t dir, std::string_view name, const InodeRecord& rec,
                uint64_t cookie) {
    uint32_t type = rec.mode & S_IFMT;
    b.Put(keys::DentryKey(dir, name), EncodeDentry({rec.ino, type, cookie}));
    b.Put(keys::DirIndexKey(dir, cookie), EncodeDirIndex(rec.ino, type, name));
  }
  // Deletes the entry and, if it is the entry's, its readdir index slot.
  void DeleteEntry(WriteBatch& b, uint64_t dir, std::string_view name, const DentryValue& d) {
    b.Delete(keys::DentryKey(dir, name));
    auto k = kv_.Get(keys::DirIndexKey(dir, d.cookie));
    if (k.ok()) {
      auto kv = DecodeDirIndex(*k);
      if (kv.ok() && kv->name == name) b.Delete(keys::DirIndexKey(dir, d.cookie));
    }
  }
  absl::Status AdjustInodes(WriteBatch& b, int64_t delta) {
    int64_t n = 0;
    auto v = kv_.Get(keys::CounterKey(0));
    if (v.ok()) {
      std::string_view in = *v;
      if (!GetVarsint64(&in, &n)) n = 0;
    } else if (!absl::IsNotFound(v.status())) {
      return v.status();
    }
    std::string out;
    PutVarsint64(&out, n + delta);
    b.Put(keys::CounterKey(0), out);
    return absl::OkStatus();
  }

  static Event MakeEvent(EventKind kind, const InodeRecord& rec, uint64_t parent,
                         std::string_view name) {
    Event e;
    e.set_kind(kind);
    e.set_ino(rec.ino);
    e.set_parent(parent);
    e.set_name(std::string(name));
    *e.mutable_attr() = rec.ToAttr();
    return e;
  }

  // Writes one repair: the batch plus its events, then logs it.
  absl::Status Commit(WriteBatch& b, std::vector<Event> events, const std::string& what) {
    if (!events.empty()) {
      if (!event_seq_loaded_) {
        RETURN_IF_ERROR(event_seq_.Load(1));
        event_seq_loaded_ = true;
      }
      ASSIGN_OR_RETURN(uint64_t first, event_seq_.Next(events.size()));
      int64_t now = NowNs();
      for (size_t i = 0; i < events.size(); ++i) {
        events[i].set_seq(first + i);
        events[i].set_time_ns(now);
        b.Put(keys::EventKey(first + i), events[i].SerializeAsString());
      }
    }
    RETURN_IF_ERROR(kv_.Write(b, false));
    ++fixes_;
    log_(what);
    return absl::OkStatus();
  }

  // /lost+found, created under the root when first needed.
  absl::StatusOr<InodeRecord> LostFound() {
    ASSIGN_OR_RETURN(auto d, Dentry(keys::kRootIno, kLostFound));
    if (d) {
      ASSIGN_OR_RETURN(auto rec, Inode(d->ino));
      if (!rec || !rec->IsDir()) {
        return absl::FailedPreconditionError(
            "/lost+found exists and is not a directory: rename it and run fsck -fix again");
      }
      return *rec;
    }
    ASSIGN_OR_RETURN(auto root, Inode(keys::kRootIno));
    if (!root || !root->IsDir()) return absl::FailedPreconditionError("no root directory");
    if (!inode_seq_loaded_) {
      RETURN_IF_ERROR(inode_seq_.Load(keys::kRootIno + 1));
      inode_seq_loaded_ = true;
    }
    ASSIGN_OR_RETURN(uint64_t ino, inode_seq_.Next(1));
    int64_t now = NowNs();
    InodeRecord lf;
    lf.ino = ino;
    lf.mode = S_IFDIR | 0700;
    lf.nlink = 2;
    lf.atime_ns = lf.mtime_ns = lf.ctime_ns = lf.crtime_ns = now;
    lf.generation = 1;
    lf.parent = keys::kRootIno;
    WriteBatch b;
    PutEntry(b, keys::kRootIno, kLostFound, lf, root->next_cookie++);
    ++root->nlink;
    root->mtime_ns = root->ctime_ns = now;
    PutInode(b, *root);
    PutInode(b, lf);
    RETURN_IF_ERROR(AdjustInodes(b, 1));
    RETURN_IF_ERROR(Commit(b, {MakeEvent(EVENT_CREATE, lf, keys::kRootIno, kLostFound)},
                           fmt::format("created /{} (inode {})", kLostFound, ino)));
    return lf;
  }

  // Adds rec to lost+found as "#<ino>" in b (rec and lf are updated, not yet written).
  absl::StatusOr<std::string> AddToLostFound(WriteBatch& b, InodeRecord& lf, InodeRecord& rec) {
    std::string name = StrCat("#", rec.ino);
    for (int n = 1; Exists(keys::DentryKey(lf.ino, name)); ++n) name = StrCat("#", rec.ino, ".", n);
    PutEntry(b, lf.ino, name, rec, lf.next_cookie++);
    if (rec.IsDir()) {
      rec.parent = lf.ino;
      ++lf.nlink;
    } else {
      rec.nlink = 1;
      if (rec.parent == 0) rec.parent = lf.ino;
    }
    lf.mtime_ns = lf.ctime_ns = NowNs();
    return name;
  }

  // --- Stage 0 -----------------------------------------------------------------------

  absl::Status RaiseSequence(const Problem& p) {
    std::string v;
    PutFixed64BE(&v, p.value);
    WriteBatch b;
    b.Put(keys::SequenceKey(p.name), v);
    RETURN_IF_ERROR(kv_.Write(b, true));
    ++fixes_;
    log_(fmt::format("sequence {}: mark raised to {}", p.name, p.value));
    return absl::OkStatus();
  }

  // --- Stage 1 -----------------------------------------------------------------------

  absl::Status RecreateInodes(const std::vector<const Problem*>& todo) {
    std::set<uint64_t> missing;
    for (const Problem* p : todo) {
      missing.insert(p->kind == ProblemKind::kDentryParentMissing ? p->parent : p->ino);
    }
    // Where a dangling entry names a missing inode, the inode comes back under that name;
    // an inode whose entry sits in another missing directory waits for that one first.
    std::map<uint64_t, std::pair<uint64_t, std::string>> named;
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

  absl::Status FindDanglingEntries(const std::set<uint64_t>& missing,
                                   std::map<uint64_t, std::pair<uint64_t, std::string>>* named) {
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

  absl::Status Recreate(uint64_t ino, const std::pair<uint64_t, std::string>* name) {
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
      PutInode(b, lf);
      where = fmt::format("as /{}/{}", kLostFound, n);
      events.push_back(MakeEvent(EVENT_CREATE, rec, lf.ino, n));
    }
    PutInode(b, rec);
    RETURN_IF_ERROR(AdjustInodes(b, 1));
    return Commit(b, std::move(events),
                  fmt::format("inode {}: recreated as a {} ({} bytes, {} chunks) {}", ino,
                              TypeName(rec.mode), rec.size, rec.chunk_count, where));
  }

  // --- Stage 2 -----------------------------------------------------------------------

  absl::Status FixRecord(const Problem& p) {
    WriteBatch b;
    switch (p.kind) {
      case ProblemKind::kDentryParentNotDir:
      case ProblemKind::kDentryChildMissing:
      case ProblemKind::kDirExtraName: {
        ASSIGN_OR_RETURN(auto d, Dentry(p.parent, p.name));
        if (!d || d->ino != p.ino) return absl::OkStatus();
        DeleteEntry(b, p.parent, p.name, *d);
        std::vector<Event> events;
        ASSIGN_OR_RETURN(auto dir, Inode(p.parent));
        if (dir && dir->IsDir()) {
          dir->mtime_ns = dir->ctime_ns = NowNs();
          PutInode(b, *dir);
        }
        InodeRecord gone;
        gone.ino = p.ino;
        events.push_back(MakeEvent(EVENT_DELETE, gone, p.parent, p.name));
        return Commit(b, std::move(events),
                      fmt::format("entry {}/{} (inode {}) dropped: {}", p.parent, p.name, p.ino,
                                  p.message));
      }
      case ProblemKind::kDentryType: {
        ASSIGN_OR_RETURN(auto d, Dentry(p.parent, p.name));
        ASSIGN_OR_RETURN(auto rec, Inode(p.ino));
        if (!d || !rec || d->ino != p.ino) return absl::OkStatus();
        b.Put(keys::DentryKey(p.parent, p.name), EncodeDentry({p.ino, rec->mode & S_IFMT, d->cookie}));
        auto k = kv_.Get(keys::DirIndexKey(p.parent, d->cookie));
        auto kv = k.ok() ? DecodeDirIndex(*k) : absl::StatusOr<DirIndexValue>(k.status());
        if (kv.ok() && kv->name == p.name) {
          b.Put(keys::DirIndexKey(p.parent, d->cookie),
                EncodeDirIndex(p.ino, rec->mode & S_IFMT, p.name));
        }
        return Commit(b, {MakeEvent(EVENT_ATTR, *rec, p.parent, p.name)},
                      fmt::format("entry {}/{}: type set to the inode's", p.parent, p.name));
      }
      default:
        // A record to drop, named by its key: stale readdir slots, orphan marks of missing
        // inodes, bad or still-referenced GC entries (the blob stays: at worst it leaks),
        // bad events.
        if (p.key.empty() || !Exists(p.key)) return absl::OkStatus();
        b.Delete(p.key);
        return Commit(b, {}, fmt::format("removed: {}", p.message));
    }
  }

  // --- Stage 3 -----------------------------------------------------------------------

  absl::Status FixIndex(const std::vector<const Problem*>& todo) {
    std::map<uint64_t, uint64_t> max_cookie;
    for (const Problem* p : todo) {
      if (p->kind == ProblemKind::kDentryCookie) {
        max_cookie[p->parent] = std::max(max_cookie[p->parent], p->value);
      }
    }
    for (const auto& [dir, cookie] : max_cookie) {
      ASSIGN_OR_RETURN(auto rec, Inode(dir));
      if (!rec || rec->next_cookie > cookie) continue;
      uint64_t old = rec->next_cookie;
      rec->next_cookie = cookie + 1;
      WriteBatch b;
      PutInode(b, *rec);
      RETURN_IF_ERROR(Commit(b, {}, fmt::format("directory {}: next cookie {} -> {}", dir, old,
                                                rec->next_cookie)));
    }
    for (const Problem* p : todo) {
      if (p->kind != ProblemKind::kDentryIndex) continue;
      ASSIGN_OR_RETURN(auto d, Dentry(p->parent, p->name));
      ASSIGN_OR_RETURN(auto dir, Inode(p->parent));
      if (!d || !dir || !dir->IsDir()) continue;
      auto k = kv_.Get(keys::DirIndexKey(p->parent, d->cookie));
      if (!k.ok() && !absl::IsNotFound(k.status())) return k.status();
      auto slot = k.ok() ? DecodeDirIndex(*k) : absl::StatusOr<DirIndexValue>(k.status());
      WriteBatch b;
      uint64_t cookie = d->cookie;
      if (k.ok() && slot.ok() && slot->name != p->name) {
        // The slot belongs to another name: this entry gets a new one.
        cookie = dir->next_cookie++;
        PutInode(b, *dir);
        b.Put(keys::DentryKey(p->parent, p->name), EncodeDentry({d->ino, d->type, cookie}));
      }
      b.Put(keys::DirIndexKey(p->parent, cookie), EncodeDirIndex(d->ino, d->type, p->name));
      RETURN_IF_ERROR(Commit(b, {}, fmt::format("entry {}/{}: readdir index rebuilt (cookie {})",
                                                p->parent, p->name, cookie)));
    }
    return absl::OkStatus();
  }

  // --- Stage 4 -----------------------------------------------------------------------

  absl::Status FixInodes(const std::vector<const Problem*>& todo) {
    std::map<uint64_t, std::vector<const Problem*>> by_ino;
    for (const Problem* p : todo) by_ino[p->ino].push_back(p);
    for (const auto& [ino, problems] : by_ino) {
      ASSIGN_OR_RETURN(auto rec, Inode(ino));
      if (!rec) continue;
      WriteBatch b;
      std::vector<Event> events;
      std::vector<std::string> what;
      std::optional<InodeRecord> lf;
      for (const Problem* p : problems) {
        switch (p->kind) {
          case ProblemKind::kNlink:
            what.push_back(fmt::format("nlink {} -> {}", rec->nlink, p->value));
            rec->nlink = static_cast<uint32_t>(p->value);
            break;
          case ProblemKind::kDirParent:
            what.push_back(fmt::format("parent {} -> {}", rec->parent, p->value));
            rec->parent = p->value;
            break;
          case ProblemKind::kChunkCount:
            what.push_back(fmt::format("chunk_count {} -> {}", rec->chunk_count, p->value));
            rec->chunk_count = p->value;
            rec->compacted_chunks = std::min(rec->compacted_chunks, p->value);
            break;
          case ProblemKind::kInlineSize:
            what.push_back(fmt::format("inline_size {} -> {}", rec->inline_size, p->value));
            rec->inline_size = p->value;
            break;
          case ProblemKind::kJournalCount:
            what.push_back(fmt::format("journal_count {} -> {}", rec->journal_count, p->value));
            rec->journal_count = p->value;
            break;
          case ProblemKind::kNotOrphan: {
            ASSIGN_OR_RETURN(bool entries, HasEntries(ino));
            if (rec->IsDir() && entries) {
              // Purging it would strand what is inside: keep it, in lost+found.
              ASSIGN_OR_RETURN(lf, LostFound());
              if (lf->ino == ino) break;
              rec->nlink = 2;
              ASSIGN_OR_RETURN(std::string n, AddToLostFound(b, *lf, *rec));
              events.push_back(MakeEvent(EVENT_CREATE, *rec, lf->ino, n));
              what.push_back(fmt::format("nlink 0 but not empty: linked as /{}/{}", kLostFound, n));
              break;
            }
            std::string v;
            PutVarint64(&v, static_cast<uint64_t>(NowNs()));
            b.Put(keys::OrphanKey(ino), v);
            what.push_back("put on the orphan list (nlink 0, no name: the filer purges it)");
            break;
          }
          case ProblemKind::kOrphanLinked:
            b.Delete(keys::OrphanKey(ino));
            what.push_back("taken off the orphan list (it is linked)");
            break;
          case ProblemKind::kUnreachable: {
            ASSIGN_OR_RETURN(lf, LostFound());
            if (lf->ino == ino) break;
            ASSIGN_OR_RETURN(std::string n, AddToLostFound(b, *lf, *rec));
            events.push_back(MakeEvent(EVENT_CREATE, *rec, lf->ino, n));
            what.push_back(fmt::format("linked as /{}/{}", kLostFound, n));
            break;
          }
          default:
            break;
        }
      }
      if (what.empty()) continue;
      rec->ctime_ns = NowNs();
      if (lf) PutInode(b, *lf);
      PutInode(b, *rec);
      events.push_back(MakeEvent(EVENT_ATTR, *rec, 0, ""));
      std::string line = fmt::format("inode {}:", ino);
      for (size_t i = 0; i < what.size(); ++i) line += (i ? ", " : " ") + what[i];
      RETURN_IF_ERROR(Commit(b, std::move(events), line));
    }
    return absl::OkStatus();
  }

  // --- Stage 5 -----------------------------------------------------------------------

  absl::Status CutCycles(const std::vector<const Problem*>& todo) {
    std::set<uint64_t> cuts;
    for (const Problem* p : todo) cuts.insert(p->value);
    for (uint64_t ino : cuts) {
      ASSIGN_OR_RETURN(auto rec, Inode(ino));
      if (!rec || !rec->IsDir() || ino == keys::kRootIno) continue;
      ASSIGN_OR_RETURN(InodeRecord lf, LostFound());
      if (lf.ino == ino) continue;
      WriteBatch b;
      std::vector<Event> events;
      uint64_t old_parent = rec->parent;
      // Its name in the directory its parent pointer names.
      std::string prefix = keys::DentryPrefix(old_parent);
      auto it = kv_.Scan(prefix, keys::PrefixEnd(prefix));
      for (; it->Valid(); it->Next()) {
        auto d = DecodeDentry(it->value());
        if (!d.ok() || d->ino != ino) continue;
        std::string name(keys::NameOf(it->key()));
        DeleteEntry(b, old_parent, name, *d);
        events.push_back(MakeEvent(EVENT_DELETE, *rec, old_parent, name));
        break;
      }
      RETURN_IF_ERROR(it->status());
      ASSIGN_OR_RETURN(auto parent, Inode(old_parent));
      if (parent && parent->IsDir() && parent->ino != lf.ino && !events.empty()) {
        if (parent->nlink > 2) --parent->nlink;
        parent->mtime_ns = parent->ctime_ns = NowNs();
        PutInode(b, *parent);
      }
      ASSIGN_OR_RETURN(std::string n, AddToLostFound(b, lf, *rec));
      PutInode(b, lf);
      PutInode(b, *rec);
      events.push_back(MakeEvent(EVENT_CREATE, *rec, lf.ino, n));
      RETURN_IF_ERROR(Commit(b, std::move(events),
                             fmt::format("directory {}: cut out of a cycle, moved to /{}/{}", ino,
                                         kLostFound, n)));
    }
    return absl::OkStatus();
  }

  // --- Stage 6 -----------------------------------------------------------------------

  absl::Status RewriteCounters(uint64_t inodes) {
    WriteBatch b;
    std::string family = keys::Family(keys::kCounter);
    auto it = kv_.Scan(family, keys::PrefixEnd(family));
    for (; it->Valid(); it->Next()) b.Delete(it->key());
    RETURN_IF_ERROR(it->status());
    std::string v;
    PutVarsint64(&v, static_cast<int64_t>(inodes));
    b.Put(keys::CounterKey(0), v);
    return Commit(b, {}, fmt::format("inode counters rewritten: {} inodes", inodes));
  }

  KvStore& kv_;
  const std::function<void(std::string_view)>& log_;
  SequenceAllocator event_seq_;
  SequenceAllocator inode_seq_;
  bool event_seq_loaded_ = false;
  bool inode_seq_loaded_ = false;
  uint64_t fixes_ = 0;
};

}  // namespace

absl::StatusOr<RepairResult> RepairNamespace(KvStore& kv,
                                             const std::function<void(std::string_view)>& log) {
  return Repairer(kv, log).Run();
}

}  // namespace kelp::filer
