#include "filer/core/consistency_check.h"

#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "filer/store/keys.h"
#include "filer/store/records.h"
#include "shared/coding.h"
#include "shared/file_id.h"
#include "shared/progress.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::filer {
namespace {

struct InodeInfo {
  uint32_t mode = 0;
  uint32_t nlink = 0;
  uint64_t parent = 0;
  uint64_t size = 0;
  uint64_t chunk_count = 0;
  uint64_t journal_count = 0;
  uint64_t inline_size = 0;
  uint64_t next_cookie = 0;
  bool corrupt = false;  // the record does not decode: present, but nothing is known
  // Observed.
  uint32_t links = 0;
  uint32_t subdirs = 0;
  uint64_t chunks_seen = 0;
  uint64_t journal_seen = 0;
  uint64_t inline_seen = 0;
  bool orphan = false;
};

struct Name {
  uint64_t parent;
  std::string name;
};

// The first number each sequence hands out on a fresh store (FilerService, Topology).
uint64_t MinFirst(std::string_view seq) { return seq == keys::kInodeSeq ? keys::kRootIno + 1 : 1; }

class Checker {
 public:
  Checker(KvStore& kv, size_t max, const std::function<void(std::string_view)>* progress)
      : kv_(kv), max_(max) {
    if (progress != nullptr && *progress) progress_.emplace(*progress);
  }

  absl::StatusOr<ConsistencyReport> Run() {
    phase_ = "inodes";
    RETURN_IF_ERROR(ScanInodes());
    phase_ = "dentries";
    RETURN_IF_ERROR(ScanDentries());
    phase_ = "directory index";
    RETURN_IF_ERROR(ScanDirIndex());
    phase_ = "orphans";
    RETURN_IF_ERROR(ScanOrphans());
    phase_ = "chunk records";
    RETURN_IF_ERROR(ScanChunks());
    phase_ = "journaled bytes";
    RETURN_IF_ERROR(ScanJournal());
    phase_ = "inline data";
    RETURN_IF_ERROR(ScanInlineAndXattrs(keys::kInline));
    phase_ = "xattrs";
    RETURN_IF_ERROR(ScanInlineAndXattrs(keys::kXattr));
    phase_ = "GC queue";
    RETURN_IF_ERROR(ScanGc());
    phase_ = "events";
    RETURN_IF_ERROR(ScanEvents());
    RETURN_IF_ERROR(CheckCounters());
    RETURN_IF_ERROR(CheckSequences());
    CheckInodes();
    return std::move(r_);
  }

 private:
  template <typename... Args>
  void Add(Problem p, fmt::format_string<Args...> f, Args&&... args) {
    ++r_.problem_count;
    if (max_ != 0 && r_.problems.size() >= max_) return;
    p.message = fmt::format(f, std::forward<Args>(args)...);
    r_.problems.push_back(std::move(p));
  }
  static Problem P(ProblemKind kind, uint64_t ino = 0) {
    Problem p;
    p.kind = kind;
    p.ino = ino;
    return p;
  }
  static Problem Entry(ProblemKind kind, uint64_t parent, std::string_view name, uint64_t ino) {
    Problem p = P(kind, ino);
    p.parent = parent;
    p.name = std::string(name);
    return p;
  }
  static Problem Keyed(ProblemKind kind, std::string_view key, uint64_t ino = 0) {
    Problem p = P(kind, ino);
    p.key = std::string(key);
    return p;
  }

  // Counts the keys each scan visits, for progress lines.
  class CountingIterator : public KvIterator {
   public:
    CountingIterator(std::unique_ptr<KvIterator> it, Progress* p, const char* phase)
        : it_(std::move(it)), progress_(p), phase_(phase) {}
    bool Valid() const override { return it_->Valid(); }
    void Next() override {
      it_->Next();
      progress_->Tick(StrCat("filer.fsck: ", phase_), ++n_, 0, "keys");
    }
    std::string_view key() const override { return it_->key(); }
    std::string_view value() const override { return it_->value(); }
    absl::Status status() const override { return it_->status(); }

   private:
    std::unique_ptr<KvIterator> it_;
    Progress* progress_;
    const char* phase_;
    uint64_t n_ = 0;
  };

  std::unique_ptr<KvIterator> Family(char f) {
    std::string p = keys::Family(f);
    std::unique_ptr<KvIterator> it = kv_.Scan(p, keys::PrefixEnd(p));
    if (!progress_) return it;
    return std::make_unique<CountingIterator>(std::move(it), &*progress_, phase_);
  }

  // The fid's volume id and needle key count towards the cluster's sequences.
  bool NoteFid(std::string_view fid) {
    auto id = FileId::Parse(fid);
    if (!id.ok()) return false;
    max_volume_id_ = std::max<uint64_t>(max_volume_id_, id->volume_id);
    max_needle_key_ = std::max(max_needle_key_, id->key);
    return true;
  }

  absl::Status ScanInodes() {
    auto it = Family(keys::kInode);
    for (; it->Valid(); it->Next()) {
      uint64_t ino = keys::FirstU64(it->key());
      max_ino_ = std::max(max_ino_, ino);
      ++r_.inodes;
      InodeInfo& i = inodes_[ino];
      auto rec = DecodeInode(ino, it->value());
      if (!rec.ok()) {
        i.corrupt = true;
        Add(Keyed(ProblemKind::kCorruptRecord, it->key(), ino), "inode {}: record corrupt ({})",
            ino, rec.status().message());
        continue;
      }
      i.mode = rec->mode;
      i.nlink = rec->nlink;
      i.parent = rec->parent;
      i.size = rec->size;
      i.chunk_count = rec->chunk_count;
      i.journal_count = rec->journal_count;
      i.inline_size = rec->inline_size;
      i.next_cookie = rec->next_cookie;
      if (S_ISDIR(rec->mode)) ++r_.directories;
    }
    RETURN_IF_ERROR(it->status());
    if (!inodes_.count(keys::kRootIno)) Add(P(ProblemKind::kRootMissing, 1), "root inode missing");
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
        Add(Keyed(ProblemKind::kCorruptRecord, it->key()), "dentry {}/{}: corrupt", parent, name);
        continue;
      }
      auto p = inodes_.find(parent);
      if (p == inodes_.end()) {
        Add(Entry(ProblemKind::kDentryParentMissing, parent, name, d->ino),
            "dentry {}/{}: directory {} missing", parent, name, parent);
      } else if (p->second.corrupt) {
        // Nothing is known of the directory.
      } else if (!S_ISDIR(p->second.mode)) {
        Add(Entry(ProblemKind::kDentryParentNotDir, parent, name, d->ino),
            "dentry {}/{}: {} is not a directory", parent, name, parent);
      } else if (d->cookie >= p->second.next_cookie) {
        Problem pr = Entry(ProblemKind::kDentryCookie, parent, name, d->ino);
        pr.value = d->cookie;
        Add(std::move(pr), "dentry {}/{}: cookie {} not below the directory's next cookie {}",
            parent, name, d->cookie, p->second.next_cookie);
      }
      auto k = kv_.Get(keys::DirIndexKey(parent, d->cookie));
      auto kv = k.ok() ? DecodeDirIndex(*k) : absl::StatusOr<DirIndexValue>(k.status());
      if (!kv.ok() || kv->ino != d->ino || kv->name != name || kv->type != d->type) {
        Problem pr = Entry(ProblemKind::kDentryIndex, parent, name, d->ino);
        pr.value = d->cookie;
        Add(std::move(pr), "dentry {}/{}: readdir index entry {} missing or different", parent,
            name, d->cookie);
      }
      auto c = inodes_.find(d->ino);
      if (c == inodes_.end()) {
        Add(Entry(ProblemKind::kDentryChildMissing, parent, name, d->ino),
            "dentry {}/{}: inode {} missing (dangling entry)", parent, name, d->ino);
        continue;
      }
      InodeInfo& child = c->second;
      if (child.corrupt) continue;
      if ((child.mode & S_IFMT) != d->type) {
        Add(Entry(ProblemKind::kDentryType, parent, name, d->ino),
            "dentry {}/{}: type {:o} but inode {} is {:o}", parent, name, d->type, d->ino,
            child.mode & S_IFMT);
      }
      ++child.links;
      if (S_ISDIR(child.mode)) {
        if (p != inodes_.end()) ++p->second.subdirs;
        dir_names_[d->ino].push_back({parent, name});
      }
    }
    return it->status();
  }

  absl::Status ScanDirIndex() {
    auto it = Family(keys::kDirIndex);
    for (; it->Valid(); it->Next()) {
      uint64_t parent = keys::FirstU64(it->key());
      uint64_t cookie = keys::SecondU64(it->key());
      auto k = DecodeDirIndex(it->value());
      if (!k.ok()) {
        Add(Keyed(ProblemKind::kIndexStale, it->key()), "readdir index {}/{}: corrupt", parent,
            cookie);
        continue;
      }
      auto v = kv_.Get(keys::DentryKey(parent, k->name));
      auto d = v.ok() ? DecodeDentry(*v) : absl::StatusOr<DentryValue>(v.status());
      if (!d.ok() || d->cookie != cookie) {
        Add(Keyed(ProblemKind::kIndexStale, it->key()),
            "readdir index {}/{} names {} without a matching dentry", parent, cookie, k->name);
      }
    }
    return it->status();
  }

  absl::Status ScanOrphans() {
    auto it = Family(keys::kOrphan);
    for (; it->Valid(); it->Next()) {
      ++r_.orphans;
      uint64_t ino = keys::FirstU64(it->key());
      auto i = inodes_.find(ino);
      if (i == inodes_.end()) {
        Add(Keyed(ProblemKind::kOrphanWithoutInode, it->key(), ino), "orphan {}: inode missing",
            ino);
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
      uint64_t seq = keys::SecondU64(it->key());
      max_chunk_seq_ = std::max(max_chunk_seq_, seq);
      auto c = DecodeChunk(seq, it->value());
      if (!c.ok()) {
        Add(Keyed(ProblemKind::kCorruptRecord, it->key(), ino), "chunk {}/{}: corrupt", ino, seq);
      } else if (c->fid().empty()) {
        journaled_[{ino, seq}] = c->size();  // its bytes are in the J family
        if (auto i = inodes_.find(ino); i != inodes_.end()) ++i->second.journal_seen;
      } else if (!NoteFid(c->fid())) {
        Add(Keyed(ProblemKind::kChunkBadFid, it->key(), ino), "chunk {}/{}: malformed fid '{}'",
            ino, seq, c->fid());
      } else {
        referenced_.insert(c->fid());
      }
      auto i = inodes_.find(ino);
      if (i == inodes_.end()) {
        records_without_inode_.insert(ino);
      } else {
        ++i->second.chunks_seen;
      }
    }
    return it->status();
  }

  absl::Status ScanJournal() {
    auto it = Family(keys::kJournal);
    for (; it->Valid(); it->Next()) {
      uint64_t ino = keys::FirstU64(it->key());
      uint64_t seq = keys::SecondU64(it->key());
      if (inodes_.find(ino) == inodes_.end()) {
        records_without_inode_.insert(ino);
        continue;
      }
      auto j = journaled_.find({ino, seq});
      int64_t ms;
      std::string_view data;
      if (j == journaled_.end()) {
        Add(Keyed(ProblemKind::kJournalStray, it->key(), ino), "journal {}/{}: bytes no chunk record names", ino, seq);
      } else if (!DecodeJournal(it->value(), &ms, &data).ok() || data.size() != j->second) {
        Add(Keyed(ProblemKind::kCorruptRecord, it->key(), ino), "journal {}/{}: corrupt or of the wrong size", ino,
            seq);
      }
      if (j != journaled_.end()) journaled_.erase(j);
    }
    for (const auto& [key, size] : journaled_) {
      if (inodes_.find(key.first) == inodes_.end()) continue;
      Add(Keyed(ProblemKind::kJournalMissing, keys::ChunkKey(key.first, key.second), key.first),
          "chunk {}/{}: journaled, but its {} bytes are missing", key.first, key.second, size);
    }
    return it->status();
  }

  absl::Status ScanInlineAndXattrs(char family) {
    auto it = Family(family);
    for (; it->Valid(); it->Next()) {
      uint64_t ino = keys::FirstU64(it->key());
      if (family == keys::kXattr) ++r_.xattrs;
      auto i = inodes_.find(ino);
      if (i == inodes_.end()) {
        records_without_inode_.insert(ino);
      } else if (family == keys::kInline) {
        i->second.inline_seen = it->value().size();
      }
    }
    return it->status();
  }

  absl::Status ScanGc() {
    auto it = Family(keys::kGc);
    for (; it->Valid(); it->Next()) {
      ++r_.gc_entries;
      if (it->key().size() == 17) max_gc_seq_ = std::max(max_gc_seq_, keys::SecondU64(it->key()));
      auto g = DecodeGc(it->value());
      if (!g.ok() || it->key().size() != 17) {
        Add(Keyed(ProblemKind::kGcBadEntry, it->key()), "gc entry corrupt");
      } else if (!NoteFid(g->fid)) {
        Add(Keyed(ProblemKind::kGcBadEntry, it->key(), g->ino), "gc entry: malformed fid '{}'",
            g->fid);
      } else if (referenced_.count(g->fid)) {
        Add(Keyed(ProblemKind::kGcReferenced, it->key(), g->ino),
            "gc entry {} is still referenced by a chunk record (its delete would lose data)",
            g->fid);
      }
    }
    return it->status();
  }

  absl::Status ScanEvents() {
    uint64_t floor = 1;
    if (auto v = kv_.Get(keys::MetaKey(keys::kEventFloorName)); v.ok() && v->size() == 8) {
      floor = DecodeFixed64BE(*v);
    }
    auto it = Family(keys::kEvent);
    for (; it->Valid(); it->Next()) {
      ++r_.events;
      uint64_t seq = keys::FirstU64(it->key());
      max_event_seq_ = std::max(max_event_seq_, seq);
      Event e;
      if (it->key().size() != 9 || !e.ParseFromArray(it->value().data(), it->value().size())) {
        Add(Keyed(ProblemKind::kEventBad, it->key()), "event {}: corrupt", seq);
      } else if (e.seq() != seq) {
        Add(Keyed(ProblemKind::kEventBad, it->key()), "event {}: says it is event {}", seq,
            e.seq());
      } else if (seq < floor) {
        Add(Keyed(ProblemKind::kEventBelowFloor, it->key()),
            "event {}: below the trim floor {} (a trim was lost half way)", seq, floor);
      }
    }
    return it->status();
  }

  absl::Status CheckCounters() {
    int64_t sum = 0;
    auto it = Family(keys::kCounter);
    for (; it->Valid(); it->Next()) {
      auto n = DecodeCounter(it->value());
      if (!n.ok()) {
        Add(Keyed(ProblemKind::kCounters, it->key()), "inode counter corrupt");
      }
      sum += n.value_or(0);
    }
    RETURN_IF_ERROR(it->status());
    if (sum != static_cast<int64_t>(r_.inodes)) {
      Problem p = P(ProblemKind::kCounters);
      p.value = r_.inodes;
      Add(std::move(p), "inode counters say {} inodes, the store holds {}", sum, r_.inodes);
    }
    return absl::OkStatus();
  }

  absl::Status CheckSequences() {
    struct Seq {
      std::string_view name;
      uint64_t max_used;
      bool only_if_present;  // the cluster's marks exist once the filer's Assign ran
    };
    const Seq seqs[] = {
        {keys::kInodeSeq, max_ino_, false},
        {keys::kChunkSeq, max_chunk_seq_, false},
        {keys::kEventSeq, max_event_seq_, false},
        {keys::kGcSeq, max_gc_seq_, false},
        {keys::kVolumeIdSeq, max_volume_id_, true},
        {keys::kNeedleKeySeq, max_needle_key_, true},
    };
    for (const Seq& s : seqs) {
      uint64_t mark = 0;
      auto v = kv_.Get(keys::SequenceKey(s.name));
      if (v.ok()) {
        if (v->size() != 8) {
          Problem p = P(ProblemKind::kSequence);
          p.name = std::string(s.name);
          p.value = s.max_used + 1;
          Add(std::move(p), "sequence {}: corrupt mark", s.name);
          continue;
        }
        mark = DecodeFixed64BE(*v);
      } else if (!absl::IsNotFound(v.status())) {
        return v.status();
      } else if (s.only_if_present) {
        continue;
      }
      if (std::max(mark, MinFirst(s.name)) <= s.max_used) {
        Problem p = P(ProblemKind::kSequence);
        p.name = std::string(s.name);
        p.value = s.max_used + 1;
        Add(std::move(p), "sequence {}: mark {} but {} is in use (it would be handed out again)",
            s.name, mark, s.max_used);
      }
    }
    return absl::OkStatus();
  }

  void CheckInodes() {
    for (uint64_t ino : records_without_inode_) {
      Add(P(ProblemKind::kRecordsWithoutInode, ino), "inode {} missing but has chunk, inline or xattr records", ino);
    }
    std::map<uint64_t, const InodeInfo*> sorted;  // deterministic report order
    for (const auto& [ino, i] : inodes_) sorted[ino] = &i;
    for (const auto& [ino, ip] : sorted) {
      const InodeInfo& i = *ip;
      if (i.corrupt) continue;
      const bool dir = S_ISDIR(i.mode);
      const bool root = ino == keys::kRootIno;
      if (dir) {
        CheckDirectory(ino, i);
      } else if (i.links > 0 && i.nlink != i.links) {
        Problem p = P(ProblemKind::kNlink, ino);
        p.value = i.links;
        Add(std::move(p), "inode {}: nlink {} but {} names", ino, i.nlink, i.links);
      }
      if (!root && i.links == 0) {
        if (i.nlink == 0 && !i.orphan) {
          Add(P(ProblemKind::kNotOrphan, ino), "inode {}: nlink 0 and no name, but not on the orphan list", ino);
        } else if (i.nlink > 0) {
          Add(P(ProblemKind::kUnreachable, ino), "inode {}: nlink {} but no name (unreachable)",
              ino, i.nlink);
        }
      }
      if (i.orphan && (i.links > 0 || root)) {
        Add(P(ProblemKind::kOrphanLinked, ino), "inode {}: on the orphan list but linked", ino);
      }
      if (i.journal_seen != i.journal_count) {
        Problem p = P(ProblemKind::kJournalCount, ino);
        p.value = i.journal_seen;
        Add(std::move(p), "inode {}: journal_count {} but {} journaled chunk records", ino, i.journal_count,
            i.journal_seen);
      }
      if (i.chunks_seen != i.chunk_count) {
        Problem p = P(ProblemKind::kChunkCount, ino);
        p.value = i.chunks_seen;
        Add(std::move(p), "inode {}: chunk_count {} but {} chunk records", ino, i.chunk_count,
            i.chunks_seen);
      }
      if (i.inline_seen != i.inline_size) {
        Problem p = P(ProblemKind::kInlineSize, ino);
        p.value = i.inline_seen;
        Add(std::move(p), "inode {}: inline_size {} but {} bytes stored", ino, i.inline_size,
            i.inline_seen);
      } else if (i.inline_size > i.size) {
        Add(P(ProblemKind::kInlineTooLarge, ino), "inode {}: inline data larger than the file", ino);
      }
    }
  }

  void CheckDirectory(uint64_t ino, const InodeInfo& i) {
    const bool root = ino == keys::kRootIno;
    const uint32_t want_nlink = 2 + i.subdirs;
    if (i.nlink != want_nlink && (i.links > 0 || root || i.nlink > 0)) {
      Problem p = P(ProblemKind::kNlink, ino);
      p.value = want_nlink;
      Add(std::move(p), "directory {}: nlink {} but {} subdirectories", ino, i.nlink, i.subdirs);
    }
    auto names = dir_names_.find(ino);
    if (names != dir_names_.end()) {
      // One name is the directory's own: the one its parent pointer agrees with, else the
      // first. Root has none.
      const std::vector<Name>& n = names->second;
      size_t keep = n.size();
      if (!root) {
        keep = 0;
        for (size_t k = 0; k < n.size(); ++k) {
          if (n[k].parent == i.parent) keep = k;
        }
      }
      for (size_t k = 0; k < n.size(); ++k) {
        if (k == keep) continue;
        Add(Entry(ProblemKind::kDirExtraName, n[k].parent, n[k].name, ino),
            "directory {}: extra name {}/{}", ino, n[k].parent, n[k].name);
      }
      if (!root && i.parent != n[keep].parent) {
        Problem p = P(ProblemKind::kDirParent, ino);
        p.value = n[keep].parent;
        Add(std::move(p), "directory {}: parent pointer {} but its entry is in {}", ino, i.parent,
            n[keep].parent);
        return;
      }
    }
    if (root) {
      if (i.parent != keys::kRootIno) {
        Problem p = P(ProblemKind::kDirParent, ino);
        p.value = keys::kRootIno;
        Add(std::move(p), "root: parent pointer {}", i.parent);
      }
      return;
    }
    if (i.links > 0) {
      uint64_t cut = 0;
      if (!ReachesRoot(ino, &cut)) {
        Problem p = P(ProblemKind::kDirUnreachable, ino);
        p.value = cut;
        Add(std::move(p), "directory {}: parent pointers do not lead to the root", ino);
      }
    }
  }

  // Follows directory parent pointers to the root, remembering directories known good. On
  // failure *cut is where the chain can be cut to reattach it: the last directory before a
  // missing or non-directory parent, or the least inode of the cycle.
  bool ReachesRoot(uint64_t ino, uint64_t* cut) {
    std::vector<uint64_t> path;
    std::unordered_map<uint64_t, size_t> seen;
    for (uint64_t cur = ino;;) {
      if (cur == keys::kRootIno || reaches_root_.count(cur)) break;
      auto it = inodes_.find(cur);
      if (it == inodes_.end() || it->second.corrupt || !S_ISDIR(it->second.mode)) {
        *cut = path.empty() ? ino : path.back();
        return false;
      }
      if (auto s = seen.find(cur); s != seen.end()) {
        *cut = *std::min_element(path.begin() + s->second, path.end());
        return false;
      }
      seen[cur] = path.size();
      path.push_back(cur);
      cur = it->second.parent;
    }
    reaches_root_.insert(path.begin(), path.end());
    return true;
  }

  KvStore& kv_;
  std::optional<Progress> progress_;
  const char* phase_ = "";
  const size_t max_;
  ConsistencyReport r_;
  std::unordered_map<uint64_t, InodeInfo> inodes_;
  std::unordered_map<uint64_t, std::vector<Name>> dir_names_;  // directories' names
  std::unordered_set<std::string> referenced_;
  std::unordered_set<uint64_t> reaches_root_;
  std::set<uint64_t> records_without_inode_;
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> journaled_;  // (ino, seq) -> size, until its J key is seen
  uint64_t max_ino_ = 0, max_chunk_seq_ = 0, max_event_seq_ = 0, max_gc_seq_ = 0;
  uint64_t max_volume_id_ = 0, max_needle_key_ = 0;
};

}  // namespace

std::string ConsistencyReport::Counts() const {
  return fmt::format(
      "{} inodes ({} directories), {} dentries, {} chunks, {} orphans, {} xattrs, {} gc entries, "
      "{} events; {} problems",
      inodes, directories, dentries, chunks, orphans, xattrs, gc_entries, events, problem_count);
}

std::string ConsistencyReport::Summary() const {
  std::string s = Counts();
  for (const auto& p : problems) s += "\n  " + p.message;
  if (problems.size() < problem_count) {
    s += fmt::format("\n  ... and {} more", problem_count - problems.size());
  }
  return s;
}

absl::StatusOr<ConsistencyReport> CheckNamespace(
    KvStore& kv, size_t max_problems, const std::function<void(std::string_view)>& progress) {
  return Checker(kv, max_problems, &progress).Run();
}

}  // namespace kelp::filer
