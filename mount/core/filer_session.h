// FilerSession: this mount's session with the filer. The filer keeps an unlinked inode alive
// (an orphan) while some session holds it open, so data stays readable through an open
// descriptor after unlink or rename-over. The session counts opens per inode (one Open RPC for
// the first handle, one Release for the last) and a thread sends KeepAlive every third of the
// lease; if the filer lost the session (restart, lapse) it is re-attached with the open inodes.
//
// Thread-safety: Open/Release/id from any thread. Start/Stop from the owner thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "mount/client/meta_client.h"

namespace kelp::mount {

class FilerSession {
 public:
  explicit FilerSession(MetaClient* meta) : meta_(meta) {}
  ~FilerSession() { Stop(); }

  absl::Status Start(const std::string& client);
  void Stop();  // releases every open inode and ends the keep-alive thread

  std::string id() const;
  // The first Open of an inode tells the filer; later ones only count. already_open: the filer
  // counted it already (Create with open_handle).
  absl::Status Open(uint64_t ino, bool already_open = false);
  void Release(uint64_t ino);
  // Tells the filer again which inodes this session holds open, recreating the session under
  // its id (after the filer answered NOT_FOUND for it: a restart or a lapse).
  absl::Status Reattach();

 private:
  void KeepAliveLoop();

  MetaClient* const meta_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string id_ ABSL_GUARDED_BY(mu_);
  std::string client_ ABSL_GUARDED_BY(mu_);
  uint32_t lease_ms_ ABSL_GUARDED_BY(mu_) = 30000;
  std::map<uint64_t, int> open_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace kelp::mount
