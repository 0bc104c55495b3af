// Striped mutexes keyed by inode number. Every read-modify-write of an inode, of a
// directory's entries or of a file's chunk list happens with the inode's stripe held.
//
// Lock order (deadlock freedom):
//   1. FilerService::rename_mu_ (only cross-directory renames that move a directory);
//   2. stripes, always taken together by Lock() in ascending stripe index;
//   3. leaf mutexes (SessionTable, EventLog, SequenceAllocator, GcWorker) never held while
//      taking 1 or 2.
// A caller never takes stripes in two steps: when it needs more inodes it unlocks, locks the
// whole set again and re-validates what it read (see Unlink, Rename).
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "shared/mutex.h"

namespace kelp::filer {

class LockTable {
 public:
  explicit LockTable(size_t stripes);
  LockTable(const LockTable&) = delete;
  LockTable& operator=(const LockTable&) = delete;

  size_t stripes() const { return n_; }
  size_t StripeOf(uint64_t ino) const;

  // Holds a set of stripes until destroyed.
  class Guard {
   public:
    Guard() = default;
    Guard(Guard&& o) noexcept : table_(o.table_), held_(std::move(o.held_)) { o.held_.clear(); }
    Guard& operator=(Guard&& o) noexcept;
    ~Guard() { Unlock(); }
    void Unlock();
    // Stripe indices held, ascending; the first one owns the inode counter the mutation
    // updates (FilerService counters_).
    const std::vector<size_t>& held() const { return held_; }

   private:
    friend class LockTable;
    LockTable* table_ = nullptr;
    std::vector<size_t> held_;
  };

  // Locks the stripes of every ino (0s are ignored, duplicates fine).
  Guard Lock(std::initializer_list<uint64_t> inos) { return Lock(std::vector<uint64_t>(inos)); }
  Guard Lock(const std::vector<uint64_t>& inos);

 private:
  const size_t n_;
  std::unique_ptr<Mutex[]> mu_;
};

}  // namespace kelp::filer
