// Sessions and open files: OpenSession, KeepAlive (with reattach), Open, Release, and the
// expiry of lapsed sessions. An unlinked inode stays (as an orphan) while any session holds it
// open. Sessions and opens live in the store (session_table.h), so they survive a filer
// restart and a client moving to another filer.
#include <algorithm>
#include <cerrno>
#include <map>
#include <set>
#include <vector>

#include "filer/core/filer_service.h"
#include "filer/core/mutation.h"
#include "shared/log.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::filer {

absl::StatusOr<OpenSessionResponse> FilerService::OpenSession(std::string_view client) {
  OpenSessionResponse resp;
  std::string id = sessions_.NewId();
  WriteBatch b;
  b.set_may_use_reserve();  // a mount must attach to read, even when the filer's disk is low
  sessions_.PutSession(b, id, client);
  RETURN_IF_ERROR(kv_->Write(b, false));
  resp.set_session(id);
  resp.set_lease_ms(static_cast<uint32_t>(std::max<int64_t>(opts_.session_timeout.count() / 3, 1)));
  return resp;
}

absl::Status FilerService::KeepAlive(std::string_view session,
                                     const std::vector<uint64_t>& open_inodes, bool reattach) {
  RETURN_IF_ERROR(SessionTable::ValidateId(session));
  if (!reattach) {
    return Transact([&]() -> absl::Status {
      // Read in the transaction, so a concurrent expiry and this renewal cannot both win.
      auto v = rd().Get(SessionTable::Key(session));
      if (absl::IsNotFound(v.status())) return absl::NotFoundError(StrCat("unknown session ", session));
      RETURN_IF_ERROR(v.status());
      LockTable::Guard none;
      Mutation m(this, none);
      m.batch().set_may_use_reserve();  // a refused renewal would let the session lapse
      sessions_.PutSession(m.batch(), session, "");
      return m.Commit();
    });
  }
  // The session (re)starts holding exactly open_inodes, those that still exist.
  std::vector<uint64_t> freed;
  RETURN_IF_ERROR(Transact([&]() -> absl::Status {
    freed.clear();
    LockTable::Guard none;
    Mutation m(this, none);
    m.batch().set_may_use_reserve();
    sessions_.PutSession(m.batch(), session, "");
    ASSIGN_OR_RETURN(std::vector<uint64_t> held, sessions_.OpensOf(rd(), session));
    std::set<uint64_t> want;
    for (uint64_t ino : open_inodes) {
      auto rec = LoadInode(ino);
      if (ErrnoOf(rec.status()) == ENOENT) continue;  // purged while the session was away
      RETURN_IF_ERROR(rec.status());
      want.insert(ino);
    }
    std::vector<uint64_t> drop;
    for (uint64_t ino : held) {
      if (!want.count(ino)) drop.push_back(ino);
    }
    sessions_.DropOpens(m.batch(), session, drop);
    for (uint64_t ino : drop) {
      ASSIGN_OR_RETURN(bool open, sessions_.IsOpen(rd(), ino, session));
      if (!open) freed.push_back(ino);
    }
    std::vector<uint64_t> add(want.begin(), want.end());
    sessions_.DropOpens(m.batch(), session, add);  // a count of exactly one each
    for (uint64_t ino : add) RETURN_IF_ERROR(sessions_.AddOpen(rd(), m.batch(), session, ino, true));
    return m.Commit();
  }));
  if (auto s = PurgeOrphansIfUnused(freed); !s.ok()) spdlog::warn("filer: purge after reattach: {}", s);
  return absl::OkStatus();
}

absl::Status FilerService::Open(std::string_view session, uint64_t ino) {
  RETURN_IF_ERROR(SessionTable::ValidateId(session));
  return Transact([&]() -> absl::Status {
    // Under the inode's lock (and in the transaction), so the inode cannot be purged between
    // the check and the count.
    auto guard = locks_.Lock({ino});
    RETURN_IF_ERROR(LoadInode(ino).status());
    ASSIGN_OR_RETURN(bool known, sessions_.Exists(rd(), session));
    if (!known) return absl::NotFoundError(StrCat("unknown session ", session));
    Mutation m(this, guard);
    m.batch().set_may_use_reserve();  // opening to read must work when the filer's disk is low
    RETURN_IF_ERROR(sessions_.AddOpen(rd(), m.batch(), session, ino));
    m.batch().Require(SessionTable::Key(session));
    absl::Status s = m.Commit();
    if (MissingKeyOf(s)) return absl::NotFoundError(StrCat("unknown session ", session));
    return s;
  });
}

absl::Status FilerService::Release(std::string_view session, const std::vector<uint64_t>& inodes,
                                   std::vector<FreedBlob>* freed) {
  if (inodes.empty() || !SessionTable::ValidateId(session).ok()) return absl::OkStatus();
  // How many handles of each inode go (a burst of closes may name one twice).
  std::map<uint64_t, uint64_t> times;
  for (uint64_t ino : inodes) ++times[ino];
  std::vector<uint64_t> lock, held;
  for (const auto& [ino, n] : times) lock.push_back(ino);
  RETURN_IF_ERROR(Transact([&]() -> absl::Status {
    held.clear();
    auto guard = locks_.Lock(lock);
    Mutation m(this, guard);
    m.batch().set_may_use_reserve();
    for (const auto& [ino, n] : times) {
      // An unknown session or an inode it does not hold is not an error (release after lapse).
      ASSIGN_OR_RETURN(bool h, sessions_.RemoveOpen(rd(), m.batch(), session, ino, n));
      if (h) held.push_back(ino);
    }
    if (held.empty()) return absl::OkStatus();
    return m.Commit();
  }));
  // An unlinked file goes with its last holder (PurgeOrphanOnce looks whether it is one).
  return PurgeOrphansIfUnused(held, freed);
}

absl::Status FilerService::ExpireSession(const std::string& id, std::vector<uint64_t>* freed) {
  // Once the session's key is gone no open can be added for it (opens Require it), so a
  // second look finds any that slipped in before and drops them too.
  for (int round = 0; round < 3; ++round) {
    bool more = false;
    std::vector<uint64_t> unheld;
    RETURN_IF_ERROR(Transact([&]() -> absl::Status {
      more = false;
      unheld.clear();
      LockTable::Guard none;
      Mutation m(this, none);
      if (round == 0) {
        auto v = rd().Get(SessionTable::Key(id));
        if (absl::IsNotFound(v.status())) return absl::OkStatus();
        RETURN_IF_ERROR(v.status());
        // Renewed since the census? Then it stays.
        ASSIGN_OR_RETURN(bool alive, sessions_.Alive(rd(), id));
        if (alive) return absl::OkStatus();
        sessions_.DropSession(m.batch(), id);
      }
      ASSIGN_OR_RETURN(std::vector<uint64_t> opens, sessions_.OpensOf(rd(), id));
      if (opens.empty() && round > 0) return absl::OkStatus();
      sessions_.DropOpens(m.batch(), id, opens);
      for (uint64_t ino : opens) {
        ASSIGN_OR_RETURN(bool open, sessions_.IsOpen(rd(), ino, id));
        if (!open) unheld.push_back(ino);
      }
      more = true;
      return m.Commit();
    }));
    freed->insert(freed->end(), unheld.begin(), unheld.end());
    if (!more) break;
  }
  return absl::OkStatus();
}

}  // namespace kelp::filer
