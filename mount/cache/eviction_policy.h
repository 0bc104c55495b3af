// Eviction policies of the read cache: which entry of a tier (or of the memory layer) goes
// next. Keys are 64-bit hashes of (file id, block offset); sizes are in bytes. A policy only
// tracks entries that are fully written and readable.
//
// Thread-safety: none. Each policy belongs to one tier and is only touched under that tier
// owner's mutex (DiskCache::mu_, MemoryLayer::mu_); every operation is O(1) amortised and does
// no I/O, so that lock stays short.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "mount/cache/cache_options.h"

namespace kelp::mount::cache {

class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;

  // Starts tracking key (which must not be tracked yet). state: 0 for a new entry, or the state
  // byte Export() gave for it before a restart.
  virtual void Add(uint64_t key, uint64_t bytes, uint8_t state = 0) = 0;
  // Records a hit on a tracked key; unknown keys are ignored.
  virtual void Touch(uint64_t key) = 0;
  // Stops tracking key without counting it as an eviction (dropped as corrupt, say).
  virtual void Erase(uint64_t key) = 0;
  // Removes and returns the entry to evict next; nullopt when empty.
  virtual std::optional<uint64_t> Evict() = 0;

  virtual size_t size() const = 0;
  virtual uint64_t bytes() const = 0;
  // Every tracked key with its state byte, in the order Add() must see them again to rebuild
  // the same eviction order (coldest first).
  virtual std::vector<std::pair<uint64_t, uint8_t>> Export() const = 0;
};

std::unique_ptr<EvictionPolicy> MakeEvictionPolicy(EvictionKind kind);

}  // namespace kelp::mount::cache
