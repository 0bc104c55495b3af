// RepairStage::kInodeFields: per inode, nlink, the parent pointer, chunk and inline
// bookkeeping and the orphan mark set to what the store says; an inode with nlink > 0 and no
// name is linked into /lost+found.
#include "filer/fsck/repairer.h"

#include <algorithm>

#include <fmt/format.h>

#include "filer/store/keys.h"
#include "shared/status.h"

namespace kelp::filer {

absl::Status Repairer::FixInodes(const Problems& todo) {
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
          b.Put(keys::OrphanKey(ino), EncodeOrphan(NowNs()));
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
    if (lf) PutInodeRecord(b, *lf);
    PutInodeRecord(b, *rec);
    events.push_back(MakeEvent(EVENT_ATTR, *rec, 0, ""));
    std::string line = fmt::format("inode {}:", ino);
    for (size_t i = 0; i < what.size(); ++i) line += (i ? ", " : " ") + what[i];
    RETURN_IF_ERROR(Commit(b, std::move(events), line));
  }
  return absl::OkStatus();
}

}  // namespace kelp::filer
