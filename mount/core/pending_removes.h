// PendingRemoves: the unlinks the mount has answered and the filer does not have yet
// (FsOptions::unlink_behind, docs/mount.md "Unlinks behind"), by (directory, name), so that what
// depends on them waits for them: a lookup of such a name says ENOENT, and a listing, a new name
// in that directory, an rmdir, a rename or an fsync of the directory first waits until they
// landed.
//
// Thread-safety: every method from any thread; one mutex, a leaf. With nothing pending (almost
// always), Has and the waits return without taking it: every lookup and create asks.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "shared/mutex.h"

namespace kelp::mount {

class PendingRemoves {
 public:
  explicit PendingRemoves(size_t max) : max_(max) {}

  // Waits while `max` are pending, then records (dir, name).
  void Add(uint64_t dir, std::string_view name);
  // The filer answered for (dir, name), whatever it said.
  void Done(uint64_t dir, std::string_view name);
  bool Has(uint64_t dir, std::string_view name);
  // Until no remove in dir is pending.
  void WaitDir(uint64_t dir);
  // Until none is pending.
  void WaitAll();
  size_t size();
  // Whether any is pending, without the lock.
  bool Any() const { return any_.load(std::memory_order_acquire) > 0; }

 private:
  const size_t max_;
  Mutex mu_;
  CondVar cv_;
  // (dir, name) -> how many removes of it are pending (more than one only in a race of two
  // unlinks of a name the kernel resolved twice).
  std::map<std::pair<uint64_t, std::string>, int> names_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, size_t> dirs_ ABSL_GUARDED_BY(mu_);
  size_t total_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<size_t> any_{0};  // total_, read without the lock
};

}  // namespace kelp::mount
