#include "filer/store/kv_store.h"

#include <unistd.h>

#include <filesystem>

#include <catch2/catch.hpp>

#include "filer/store/testing/kv_conformance.h"
#include "shared/metrics.h"

using namespace kelp::filer;
using kelp::filer::testing::KvBackend;
using kelp::filer::testing::RunKvConformance;

namespace {

std::filesystem::path TempPath(const std::string& name) {
  return std::filesystem::temp_directory_path() / (name + "-" + std::to_string(getpid()));
}

}  // namespace

TEST_CASE("kv conformance: memory") {
  RunKvConformance(KvBackend{[] { return NewMemoryKvStore(); }, nullptr});
}

TEST_CASE("kv conformance: memory, shared (validating transactions)") {
  RunKvConformance(KvBackend{[] { return NewMemoryKvStore(true); }, nullptr});
}

TEST_CASE("kv conformance: rocksdb") {
  auto dir = TempPath("kelp-kv-conf");
  std::filesystem::remove_all(dir);
  RunKvConformance(KvBackend{[&] {
                               std::filesystem::remove_all(dir);
                               return std::move(*OpenRocksKvStore(dir.string()));
                             },
                             [&] { return std::move(*OpenRocksKvStore(dir.string())); }});
  std::filesystem::remove_all(dir);
}

TEST_CASE("rocksdb: a sync with nothing written since the last one does not touch the WAL") {
  auto dir = TempPath("kelp-kv-sync");
  std::filesystem::remove_all(dir);
  {
    auto kv = OpenRocksKvStore(dir.string());
    REQUIRE(kv.ok());
    kelp::Counter* syncs = kelp::MetricsRegistry::Default().GetCounter("kelp_filer_wal_syncs_total", "");
    uint64_t n0 = syncs->value();
    REQUIRE((*kv)->Put("a", "1").ok());
    REQUIRE((*kv)->Sync().ok());
    CHECK(syncs->value() == n0 + 1);
    REQUIRE((*kv)->Sync().ok());  // nothing new
    CHECK(syncs->value() == n0 + 1);
    // A synced write covers what came before it (its own sequence number is not known here,
    // so the next Sync still syncs once).
    REQUIRE((*kv)->Put("b", "2").ok());
    REQUIRE((*kv)->Put("c", "3", true).ok());
    CHECK(syncs->value() == n0 + 2);
    REQUIRE((*kv)->Sync().ok());
    CHECK(syncs->value() == n0 + 3);
    REQUIRE((*kv)->Sync().ok());
    CHECK(syncs->value() == n0 + 3);
  }
  std::filesystem::remove_all(dir);
}
