// The rounds of RepairNamespace, and what every stage uses. The stages themselves are in
// repair_<stage>.cc (repairer.h lists them).
#include "filer/fsck/repair.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "filer/core/clock.h"
#include "filer/core/options.h"
#include "filer/fsck/repairer.h"
#include "filer/store/keys.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::filer {
namespace {

// Problems examined per round; a store with more fixes them over several rounds.
constexpr size_t kProblemsPerRound = 100'000;
constexpr int kMaxRounds = 64;

}  // namespace

std::optional<RepairStage> StageOf(ProblemKind k) {
  switch (k) {
    case ProblemKind::kSequence:
      return RepairStage::kSequences;
    case ProblemKind::kRootMissing:
    case ProblemKind::kDentryParentMissing:
    case ProblemKind::kRecordsWithoutInode:
      return RepairStage::kMissingInodes;
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
      return RepairStage::kBadRecords;
    case ProblemKind::kDentryCookie:
    case ProblemKind::kDentryIndex:
      return RepairStage::kDirIndex;
    case ProblemKind::kNlink:
    case ProblemKind::kDirParent:
    case ProblemKind::kChunkCount:
    case ProblemKind::kJournalCount:
    case ProblemKind::kInlineSize:
    case ProblemKind::kNotOrphan:
    case ProblemKind::kOrphanLinked:
    case ProblemKind::kUnreachable:
      return RepairStage::kInodeFields;
    case ProblemKind::kDirUnreachable:
      return RepairStage::kCycles;
    case ProblemKind::kCounters:
      return RepairStage::kCounters;
    case ProblemKind::kCorruptRecord:
    case ProblemKind::kInlineTooLarge:
    case ProblemKind::kChunkBadFid:
    case ProblemKind::kJournalMissing:
      return std::nullopt;
  }
  return std::nullopt;
}

Repairer::Repairer(KvStore& kv, const std::function<void(std::string_view)>& log)
    : kv_(kv),
      log_(log),
      events_(&kv, RealClock(), FilerOptions()),
      inode_seq_(&kv, keys::kInodeSeq, 1) {}

absl::StatusOr<RepairResult> Repairer::Run() {
  RepairResult result;
  std::set<RepairStage> stuck;  // stages whose fixes changed nothing: not tried again
  for (int round = 0; round < kMaxRounds; ++round) {
    ASSIGN_OR_RETURN(ConsistencyReport report, CheckNamespace(kv_, kProblemsPerRound));
    std::optional<RepairStage> stage;
    for (const Problem& p : report.problems) {
      std::optional<RepairStage> s = StageOf(p.kind);
      if (s && !stuck.count(*s) && (!stage || *s < *stage)) stage = s;
    }
    if (!stage) break;
    ++result.rounds;
    uint64_t before = fixes_;
    Problems todo;
    for (const Problem& p : report.problems) {
      if (StageOf(p.kind) == stage) todo.push_back(&p);
    }
    RETURN_IF_ERROR(FixStage(*stage, todo, report));
    if (fixes_ == before) stuck.insert(*stage);
  }
  RETURN_IF_ERROR(kv_.Sync());
  result.fixes = fixes_;
  return result;
}

int64_t Repairer::NowNs() { return RealClock()->WallNs(); }

absl::Status Repairer::FixStage(RepairStage stage, const Problems& todo,
                                const ConsistencyReport& report) {
  switch (stage) {
    case RepairStage::kSequences:
      for (const Problem* p : todo) RETURN_IF_ERROR(RaiseSequence(*p));
      return absl::OkStatus();
    case RepairStage::kMissingInodes:
      return RecreateInodes(todo);
    case RepairStage::kBadRecords:
      for (const Problem* p : todo) RETURN_IF_ERROR(FixRecord(*p));
      return absl::OkStatus();
    case RepairStage::kDirIndex:
      return FixIndex(todo);
    case RepairStage::kInodeFields:
      return FixInodes(todo);
    case RepairStage::kCycles:
      return CutCycles(todo);
    case RepairStage::kCounters:
      return RewriteCounters(report.inodes);
  }
  return absl::OkStatus();
}

// --- Shared by the stages ------------------------------------------------------------------

absl::StatusOr<std::optional<InodeRecord>> Repairer::Inode(uint64_t ino) {
  auto v = kv_.Get(keys::InodeKey(ino));
  if (absl::IsNotFound(v.status())) return std::optional<InodeRecord>();
  if (!v.ok()) return v.status();
  ASSIGN_OR_RETURN(InodeRecord r, DecodeInode(ino, *v));
  return std::optional<InodeRecord>(std::move(r));
}

absl::StatusOr<std::optional<DentryValue>> Repairer::Dentry(uint64_t parent,
                                                            std::string_view name) {
  auto v = kv_.Get(keys::DentryKey(parent, name));
  if (absl::IsNotFound(v.status())) return std::optional<DentryValue>();
  if (!v.ok()) return v.status();
  ASSIGN_OR_RETURN(DentryValue d, DecodeDentry(*v));
  return std::optional<DentryValue>(d);
}

bool Repairer::Exists(std::string_view key) { return kv_.Get(key).ok(); }

absl::StatusOr<bool> Repairer::HasEntries(uint64_t dir) {
  std::string prefix = keys::DentryPrefix(dir);
  auto it = kv_.Scan(prefix, keys::PrefixEnd(prefix), 1);
  RETURN_IF_ERROR(it->status());
  return it->Valid();
}

void Repairer::DeleteEntry(WriteBatch& b, uint64_t dir, std::string_view name,
                           const DentryValue& d) {
  b.Delete(keys::DentryKey(dir, name));
  auto k = kv_.Get(keys::DirIndexKey(dir, d.cookie));
  if (k.ok()) {
    auto kv = DecodeDirIndex(*k);
    if (kv.ok() && kv->name == name) b.Delete(keys::DirIndexKey(dir, d.cookie));
  }
}

absl::Status Repairer::AdjustInodes(WriteBatch& b, int64_t delta) {
  int64_t n = 0;
  auto v = kv_.Get(keys::CounterKey(0));
  if (v.ok()) {
    n = DecodeCounter(*v).value_or(0);
  } else if (!absl::IsNotFound(v.status())) {
    return v.status();
  }
  b.Put(keys::CounterKey(0), EncodeCounter(n + delta));
  return absl::OkStatus();
}

absl::Status Repairer::Commit(WriteBatch& b, std::vector<Event> events, const std::string& what) {
  if (!events.empty() && !events_loaded_) {
    RETURN_IF_ERROR(events_.Load());
    events_loaded_ = true;
  }
  RETURN_IF_ERROR(events_.Write(b, events));
  ++fixes_;
  log_(what);
  return absl::OkStatus();
}

absl::StatusOr<InodeRecord> Repairer::LostFound() {
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
  PutEntryRecords(b, keys::kRootIno, kLostFound, lf, root->next_cookie++);
  ++root->nlink;
  root->mtime_ns = root->ctime_ns = now;
  PutInodeRecord(b, *root);
  PutInodeRecord(b, lf);
  RETURN_IF_ERROR(AdjustInodes(b, 1));
  RETURN_IF_ERROR(Commit(b, {MakeEvent(EVENT_CREATE, lf, keys::kRootIno, kLostFound)},
                         fmt::format("created /{} (inode {})", kLostFound, ino)));
  return lf;
}

absl::StatusOr<std::string> Repairer::AddToLostFound(WriteBatch& b, InodeRecord& lf,
                                                     InodeRecord& rec) {
  std::string name = StrCat("#", rec.ino);
  for (int n = 1; Exists(keys::DentryKey(lf.ino, name)); ++n) name = StrCat("#", rec.ino, ".", n);
  PutEntryRecords(b, lf.ino, name, rec, lf.next_cookie++);
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

absl::StatusOr<RepairResult> RepairNamespace(KvStore& kv,
                                             const std::function<void(std::string_view)>& log) {
  return Repairer(kv, log).Run();
}

}  // namespace kelp::filer
