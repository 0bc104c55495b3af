// Internal to filer/fsck/repair*.cc: the Repairer behind RepairNamespace (repair.h says what
// it repairs and what it never touches). One class, split by stage:
//   repair.cc              the rounds, and what every stage uses: store reads, a commit with
//                          its events (through filer/core's EventLog), /lost+found
//   repair_sequences.cc    RepairStage::kSequences
//   repair_missing.cc      RepairStage::kMissingInodes
//   repair_records.cc      RepairStage::kBadRecords
//   repair_index.cc        RepairStage::kDirIndex
//   repair_inodes.cc       RepairStage::kInodeFields
//   repair_cycles.cc       RepairStage::kCycles
//   repair_counters.cc     RepairStage::kCounters
//
// Not thread-safe: one thread runs it, on a store no filer has open.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "filer/core/consistency_check.h"
#include "filer/core/event_log.h"
#include "filer/fsck/repair.h"
#include "filer/store/kv_store.h"
#include "filer/store/records.h"
#include "filer/store/sequence.h"

namespace kelp::filer {

// The stages, in the order they run: each round fixes the problems of the earliest stage
// that has any, since a later stage relies on what the earlier ones make true.
enum class RepairStage {
  kSequences,      // sequence marks raised above every number in use
  kMissingInodes,  // inodes still referenced but missing are recreated
  kBadRecords,     // entries naming missing inodes or inside non-directories, extra names,
                   // stray readdir slots, orphan marks, GC entries and events dropped;
                   // entry types corrected
  kDirIndex,       // readdir index entries rebuilt, cookie counters raised
  kInodeFields,    // nlink, parent pointers, chunk and inline bookkeeping, orphan marks;
                   // unreachable inodes linked into /lost+found
  kCycles,         // directory cycles cut (one directory of each into /lost+found)
  kCounters,       // the inode counters rewritten
};

// The stage that fixes a problem of this kind; nullopt for the kinds no repair touches
// (corrupt records, malformed fids, inline data longer than its file).
std::optional<RepairStage> StageOf(ProblemKind kind);

class Repairer {
 public:
  Repairer(KvStore& kv, const std::function<void(std::string_view)>& log);

  absl::StatusOr<RepairResult> Run();

 private:
  using Problems = std::vector<const Problem*>;
  // A directory entry that names an inode: (directory, name).
  using EntryName = std::pair<uint64_t, std::string>;

  static int64_t NowNs();
  absl::Status FixStage(RepairStage stage, const Problems& todo, const ConsistencyReport& report);

  // --- Shared by the stages (repair.cc) -------------------------------------------------
  absl::StatusOr<std::optional<InodeRecord>> Inode(uint64_t ino);
  absl::StatusOr<std::optional<DentryValue>> Dentry(uint64_t parent, std::string_view name);
  bool Exists(std::string_view key);
  absl::StatusOr<bool> HasEntries(uint64_t dir);
  // Deletes the entry and, if it is the entry's, its readdir index slot.
  void DeleteEntry(WriteBatch& b, uint64_t dir, std::string_view name, const DentryValue& d);
  // Adds delta to the inode count (stripe 0's counter).
  absl::Status AdjustInodes(WriteBatch& b, int64_t delta);
  // Writes one repair: the batch with its events, then logs it.
  absl::Status Commit(WriteBatch& b, std::vector<Event> events, const std::string& what);
  // /lost+found, created under the root when first needed.
  absl::StatusOr<InodeRecord> LostFound();
  // Adds rec to lost+found as "#<ino>" in b (rec and lf are updated, not yet written).
  absl::StatusOr<std::string> AddToLostFound(WriteBatch& b, InodeRecord& lf, InodeRecord& rec);

  // --- The stages, one per file -----------------------------------------------------------
  absl::Status RaiseSequence(const Problem& p);
  absl::Status RecreateInodes(const Problems& todo);
  absl::Status FindDanglingEntries(const std::set<uint64_t>& missing,
                                   std::map<uint64_t, EntryName>* named);
  absl::Status Recreate(uint64_t ino, const EntryName* name);
  absl::Status FixRecord(const Problem& p);
  absl::Status FixIndex(const Problems& todo);
  absl::Status FixInodes(const Problems& todo);
  absl::Status CutCycles(const Problems& todo);
  absl::Status RewriteCounters(uint64_t inodes);

  KvStore& kv_;
  const std::function<void(std::string_view)>& log_;
  // Loaded when the first repair with events commits: the sequences stage runs first and
  // may raise the log's mark.
  EventLog events_;
  bool events_loaded_ = false;
  SequenceAllocator inode_seq_;
  bool inode_seq_loaded_ = false;
  uint64_t fixes_ = 0;
};

}  // namespace kelp::filer
