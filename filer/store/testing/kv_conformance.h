// The KvStore contract as tests, run against every backend (memory, RocksDB, PostgreSQL):
// call RunKvConformance from a TEST_CASE with a function that opens an empty store.
// Reopen, when set, opens the same store again (persistence).
#pragma once

#include <functional>
#include <memory>

#include "filer/store/kv_store.h"

namespace kelp::filer::testing {

struct KvBackend {
  std::function<std::unique_ptr<KvStore>()> open_empty;
  // Opens the store the last open_empty returned, again (after that one is destroyed).
  std::function<std::unique_ptr<KvStore>()> reopen;
};

// Uses Catch2 assertions (REQUIRE/CHECK) and SECTIONs.
void RunKvConformance(const KvBackend& backend);

}  // namespace kelp::filer::testing
