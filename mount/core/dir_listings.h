// DirListings: the directories whose every name this mount knows, so a lookup of a name such a
// directory lacks is answered "no such entry" without asking the filer (tar, cp and create
// workloads look up every name before creating it).
//
// A directory becomes known when this mount created it (empty) or listed it to the end at one
// version, and stays known while every change to it is applied in order. Each change of a
// directory bumps its version by one (filer: PutInode), and both the replies to this mount's
// own changes and the filer's events carry the directory's version after the change, so
// changes are applied exactly once and in order whichever path brings them first: a change to
// version v + 1 of a directory known at v is applied; one to v or older was applied already;
// a jump past v + 1 means a change went missing, and the directory is forgotten.
//
// Only while the event stream is live: the owner calls Clear() when it breaks or resets.
//
// Thread-safety: every method may be called from any thread; one mutex, held for map work
// only (a leaf lock).
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"

namespace kelp::mount {

class DirListings {
 public:
  // max_names bounds the names held over all directories (the least recently used
  // directories are forgotten beyond it).
  explicit DirListings(size_t max_names = 500'000, size_t max_seen = 65'536);

  enum class Known { kUnknown, kAbsent, kPresent };
  // What the mount knows of name in dir; *ino is set when present.
  Known Find(uint64_t dir, std::string_view name, uint64_t* ino);

  // dir was created by this mount at version: it is empty.
  void Created(uint64_t dir, uint64_t version);
  // dir was listed to the end, every page at version: these are all its names.
  void Listed(uint64_t dir, uint64_t version, std::vector<std::pair<std::string, uint64_t>> names);

  // A change of dir that took it to version: fn edits its names when the change is the next
  // one. Also remembers the version for dirs not held (a change seen before the directory
  // becomes known makes that knowledge stale).
  using Edit = std::function<void(std::unordered_map<std::string, uint64_t>& names)>;
  void Apply(uint64_t dir, uint64_t version, const Edit& fn);
  // Shortcuts for Apply.
  void Added(uint64_t dir, uint64_t version, std::string_view name, uint64_t ino);
  void Removed(uint64_t dir, uint64_t version, std::string_view name);
  // A change that touched no names (chmod, xattrs, a moved subdirectory's "..").
  void Touched(uint64_t dir, uint64_t version) { Apply(dir, version, nullptr); }

  void Forget(uint64_t dir);
  void Clear();

  size_t dirs() const;
  size_t names() const;

 private:
  struct Dir {
    uint64_t version = 0;
    std::unordered_map<std::string, uint64_t> names;
    std::list<uint64_t>::iterator lru;
  };
  void NoteSeenLocked(uint64_t dir, uint64_t version) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool SeenBeyondLocked(uint64_t dir, uint64_t version) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ForgetLocked(uint64_t dir) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void InsertLocked(uint64_t dir, Dir d) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TouchLocked(Dir& d) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TrimLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t max_names_;
  const size_t max_seen_;
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, Dir> dirs_ ABSL_GUARDED_BY(mu_);
  std::list<uint64_t> lru_ ABSL_GUARDED_BY(mu_);  // most recently used first
  size_t names_ ABSL_GUARDED_BY(mu_) = 0;
  // The newest version seen per directory (held or not), in two generations: a directory drops
  // out only after max_seen / 2 other notes, never one just seen.
  std::unordered_map<uint64_t, uint64_t> seen_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<uint64_t, uint64_t> seen_old_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kelp::mount
