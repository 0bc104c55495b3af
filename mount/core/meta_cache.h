// MetaCache: attributes and directory entries (including negative ones: "no such name") with a
// short TTL, so repeated stats and lookups of the same names do not each cost an RPC. The
// filer's event stream and this mount's own changes invalidate entries; the TTL bounds how
// stale a missed invalidation can leave one. Size is bounded (oldest entries go first).
//
// Thread-safety: every method may be called from any thread; one mutex, held only for map
// operations.
#pragma once

#include <chrono>
#include <cstdint>
#include <list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "absl/base/thread_annotations.h"
#include "proto/filer.pb.h"
#include "shared/mutex.h"

namespace kelp::mount {

class MetaCache {
 public:
  using Clock = std::chrono::steady_clock;
  // ttls of 0 disable that part of the cache.
  MetaCache(std::chrono::nanoseconds attr_ttl, std::chrono::nanoseconds entry_ttl, size_t max_entries = 200000);

  std::optional<filer::Attr> GetAttr(uint64_t ino);
  void PutAttr(const filer::Attr& attr);
  void DropAttr(uint64_t ino);

  // A cached entry: the child's ino, or 0 for "known not to exist".
  std::optional<uint64_t> GetEntry(uint64_t parent, std::string_view name);
  void PutEntry(uint64_t parent, std::string_view name, uint64_t ino);  // ino 0 = negative
  void DropEntry(uint64_t parent, std::string_view name);
  // Drops every entry of a directory (a listing changed in ways we cannot name).
  void DropDir(uint64_t parent);

  // "This inode has no such xattr", for the entry TTL. The kernel asks for
  // security.capability before every write, so this saves an RPC per write.
  // Attributes saying "no xattrs at all" (Attr.no_xattrs) answer for every name, so `ls -l`
  // (two getxattrs per file) and the first write of a new file cost no RPC.
  bool HasNoXattr(uint64_t ino, std::string_view name);
  bool HasNoXattrs(uint64_t ino);
  void PutNoXattr(uint64_t ino, std::string_view name);
  // The inode's xattrs changed (here or, by an event, elsewhere): forgets what is known and,
  // for kXattrQuarantine, ignores "no xattrs" in attributes (a reply to an RPC sent before
  // the change may still arrive).
  void DropXattrs(uint64_t ino);
  static constexpr std::chrono::seconds kXattrQuarantine{10};

  // Mode and gid of a directory as last seen; kept past DropAttr (creating a child changes a
  // directory's times, not these), so new children inherit a set-group-ID directory's group
  // without an extra RPC.
  std::optional<std::pair<uint32_t, uint32_t>> DirModeGid(uint64_t ino);

  void Clear();
  size_t size() const;

 private:
  struct AttrItem {
    filer::Attr attr;
    Clock::time_point expires;
  };
  struct EntryItem {
    uint64_t ino;
    Clock::time_point expires;
  };
  using EntryKey = std::pair<uint64_t, std::string>;
  // Whether a "no such xattr" for key is still fresh; drops it when it expired.
  bool FreshNoXattrLocked(const EntryKey& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::chrono::nanoseconds attr_ttl_, entry_ttl_;
  const size_t max_entries_;
  mutable Mutex mu_;  // a leaf (taken under DirHandle::mu)
  std::unordered_map<uint64_t, AttrItem> attrs_ ABSL_GUARDED_BY(mu_);
  std::map<EntryKey, EntryItem, std::less<>> entries_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<uint64_t, std::pair<uint32_t, uint32_t>> dir_mode_gid_ ABSL_GUARDED_BY(mu_);
  // Name "" = the inode has no xattrs at all.
  std::map<EntryKey, Clock::time_point, std::less<>> no_xattr_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<uint64_t, Clock::time_point> xattrs_changed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kelp::mount
