// FilerSession: this mount's session with the filer. The filer keeps an unlinked inode alive
// (an orphan) while some session holds it open, so data stays readable through an open
// descriptor after unlink or rename-over. The session counts opens per inode: the first handle
// costs the Open call (which also answers the attributes, and the content when asked), the
// last one's Release goes to the filer in the background, batched with others (a late release
// only keeps an orphan a little longer). A thread sends KeepAlive every third of the lease and
// the queued releases as they come; if the filer lost the session (restart, lapse) it is
// re-attached with the open inodes.
//
// Thread-safety: Open/Release/id from any thread. Start/Stop from the owner thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "mount/core/clients.h"
#include "shared/mutex.h"

namespace kelp::mount {

class FilerSession {
 public:
  // Called, from the session's threads, with the blobs of unlinked files that went with a
  // release (the read cache drops them).
  using FreedFn = std::function<void(const google::protobuf::RepeatedPtrField<filer::FreedBlob>&)>;
  explicit FilerSession(FilerClient* meta, FreedFn on_freed = nullptr)
      : meta_(meta), on_freed_(std::move(on_freed)) {}
  ~FilerSession() { Stop(); }

  absl::Status Start(const std::string& client);
  void Stop();  // releases every open inode and ends the keep-alive thread

  std::string id() const;
  // Counts an open handle of ino and answers its attributes as the filer has them now
  // (close-to-open): the first handle in this mount costs the Open call (with the content when
  // with_content), later ones a GetAttr (no content).
  absl::StatusOr<filer::GetChunksResponse> Open(uint64_t ino, bool with_content);
  // The filer counted this open already (Create with open_handle).
  void OpenedByCreate(uint64_t ino);
  // Drops a handle; the last one's release is queued for the filer.
  void Release(uint64_t ino);
  // Sends the queued releases now (tests; Stop does it too).
  void FlushReleases();
  // Tells the filer again which inodes this session holds open, recreating the session under
  // its id (after the filer answered NOT_FOUND for it: a restart or a lapse).
  absl::Status Reattach();

 private:
  void KeepAliveLoop();
  void SendReleases(std::vector<uint64_t> inodes, const std::string& id);

  FilerClient* const meta_;
  const FreedFn on_freed_;
  mutable Mutex mu_;  // a leaf: released around every filer call
  CondVar cv_;
  std::string id_ ABSL_GUARDED_BY(mu_);
  std::string client_ ABSL_GUARDED_BY(mu_);
  uint32_t lease_ms_ ABSL_GUARDED_BY(mu_) = 30000;
  std::map<uint64_t, int> open_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> releases_ ABSL_GUARDED_BY(mu_);  // queued for the filer
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace kelp::mount
