// Sessions and open files: OpenSession, KeepAlive (with reattach after a filer restart),
// Open, Release. An unlinked inode stays (as an orphan) while any session holds it open.
#include <cerrno>

#include "filer/core/filer_service.h"
#include "shared/log.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::filer {

absl::StatusOr<OpenSessionResponse> FilerService::OpenSession(std::string_view client) {
  OpenSessionResponse resp;
  resp.set_session(sessions_.Create(client));
  resp.set_lease_ms(static_cast<uint32_t>(std::max<int64_t>(opts_.session_timeout.count() / 3, 1)));
  return resp;
}

absl::Status FilerService::KeepAlive(std::string_view session,
                                     const std::vector<uint64_t>& open_inodes, bool reattach) {
  if (session.empty()) return PosixError(EINVAL, "empty session id");
  if (!reattach) return sessions_.Touch(session);
  std::vector<uint64_t> freed = sessions_.Reattach(session, "");
  for (uint64_t ino : open_inodes) {
    auto guard = locks_.Lock({ino});
    auto rec = LoadInode(ino);
    if (ErrnoOf(rec.status()) == ENOENT) continue;  // purged while the session was away
    RETURN_IF_ERROR(rec.status());
    RETURN_IF_ERROR(sessions_.Open(session, ino));
  }
  for (uint64_t ino : freed) {
    if (auto s = PurgeOrphanIfUnused(ino); !s.ok()) spdlog::warn("filer: purge {}: {}", ino, s);
  }
  return absl::OkStatus();
}

absl::Status FilerService::Open(std::string_view session, uint64_t ino) {
  // Under the inode's lock, so the inode cannot be purged between the check and the count.
  auto guard = locks_.Lock({ino});
  RETURN_IF_ERROR(LoadInode(ino).status());
  return sessions_.Open(session, ino);
}

absl::Status FilerService::Release(std::string_view session, uint64_t ino) {
  if (sessions_.Release(session, ino)) return PurgeOrphanIfUnused(ino);
  return absl::OkStatus();
}

}  // namespace kelp::filer
