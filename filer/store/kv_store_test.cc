#include "filer/store/kv_store.h"

#include <filesystem>

#include <catch2/catch.hpp>

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

TEST_CASE("rocksdb kv store, and it survives reopen") {
  auto dir = std::filesystem::temp_directory_path() / ("kelp-kv-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  {
    auto kv = OpenRocksKvStore(dir.string());
    REQUIRE(kv.ok());
    Exercise(**kv);
    REQUIRE((*kv)->Put("persist", "me", true).ok());
  }
  {
    auto kv = OpenRocksKvStore(dir.string());
    REQUIRE(kv.ok());
    CHECK(*(*kv)->Get("persist") == "me");
  }
  std::filesystem::remove_all(dir);
}
