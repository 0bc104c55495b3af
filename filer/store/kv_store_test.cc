#include "filer/store/kv_store.h"


#include <catch2/catch.hpp>

#include "shared/metrics.h"
#include "shared/testing/temp_dir.h"

using namespace kelp::filer;

namespace {

void Exercise(KvStore& kv) {
  REQUIRE(kv.Put("a1", "x").ok());
  WriteBatch b;
  b.Put("a2", "y");
  b.Put("a3", "z");
  b.Put("b1", "w");
  b.Delete("a1");
  REQUIRE(kv.Write(b, true).ok());
  CHECK(kv.Get("a1").status().code() == absl::StatusCode::kNotFound);
  CHECK(*kv.Get("a2") == "y");
  auto it = kv.Scan("a", "b");
  std::vector<std::string> keys;
  // The scan is a snapshot: a write after it started is not seen.
  REQUIRE(kv.Put("a25", "late").ok());
  for (; it->Valid(); it->Next()) keys.emplace_back(it->key());
  CHECK(keys == std::vector<std::string>{"a2", "a3"});
  WriteBatch r;
  r.DeleteRange("a", "b");
  REQUIRE(kv.Write(r, false).ok());
  auto all = kv.Scan("", "");
  REQUIRE(all->Valid());
  CHECK(all->key() == "b1");
  all->Next();
  CHECK_FALSE(all->Valid());
  CHECK(kv.Sync().ok());
}

}  // namespace

TEST_CASE("memory kv store") {
  auto kv = NewMemoryKvStore();
  Exercise(*kv);
}

TEST_CASE("rocksdb: a sync with nothing written since the last one does not touch the WAL") {
  kelp::testing::TempDir tmp("kelp-kv-sync");
  {
    auto kv = OpenRocksKvStore(tmp.path());
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
}

TEST_CASE("rocksdb kv store, and it survives reopen") {
  kelp::testing::TempDir tmp("kelp-kv");
  {
    auto kv = OpenRocksKvStore(tmp.path());
    REQUIRE(kv.ok());
    Exercise(**kv);
    REQUIRE((*kv)->Put("persist", "me", true).ok());
  }
  {
    auto kv = OpenRocksKvStore(tmp.path());
    REQUIRE(kv.ok());
    CHECK(*(*kv)->Get("persist") == "me");
  }
}
