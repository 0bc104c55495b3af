// The KvStore contract on a real PostgreSQL (started by the test: filer/store/testing), and
// what is particular to that backend.
#include "filer/store/pg_kv_store.h"

#include <atomic>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "filer/store/testing/kv_conformance.h"
#include "filer/store/testing/pg_test_server.h"
#include "shared/metrics.h"
#include "shared/strings.h"

using namespace kelp::filer;
using kelp::filer::testing::KvBackend;
using kelp::filer::testing::PgTestServer;

namespace {

PgTestServer& Server() { return kelp::filer::testing::SharedPgTestServer(); }

std::string NewKeyspace() {
  static int n = 0;
  return kelp::StrCat("t", ++n);
}

std::unique_ptr<KvStore> Open(const std::string& keyspace, size_t connections = 4) {
  PgKvOptions o;
  o.dsn = Server().dsn();
  o.keyspace = keyspace;
  o.connections = connections;
  auto kv = OpenPgKvStore(o);
  REQUIRE(kv.ok());
  return std::move(*kv);
}

}  // namespace

TEST_CASE("kv conformance: postgres") {
  std::string ks;
  kelp::filer::testing::RunKvConformance(KvBackend{[&] {
                                                     ks = NewKeyspace();
                                                     return Open(ks);
                                                   },
                                                   [&] { return Open(ks); }});
}

TEST_CASE("postgres: two keyspaces in one database do not see each other") {
  auto a = Open(NewKeyspace());
  auto b = Open(NewKeyspace());
  REQUIRE(a->Put("k", "a").ok());
  CHECK(b->Get("k").status().code() == absl::StatusCode::kNotFound);
  CHECK(a->kind() == "postgres");
  CHECK(a->shared());
}

TEST_CASE("postgres: bad options are refused with a clear error") {
  PgKvOptions o;
  o.dsn = Server().dsn();
  o.keyspace = "bad; DROP TABLE x";
  CHECK(OpenPgKvStore(o).status().code() == absl::StatusCode::kInvalidArgument);
  o.keyspace = "kelp";
  o.dsn = "host=/nonexistent-kelp-dir port=1 user=nobody dbname=none connect_timeout=2";
  auto r = OpenPgKvStore(o);
  CHECK(r.status().code() == absl::StatusCode::kUnavailable);
  o.dsn = "";
  CHECK(OpenPgKvStore(o).status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("postgres: Sync flushes only when an unsynced commit happened since the last one") {
  auto kv = Open(NewKeyspace());
  kelp::Counter* syncs = kelp::MetricsRegistry::Default().GetCounter("kelp_filer_wal_syncs_total", "");
  REQUIRE(kv->Put("a", "1").ok());
  uint64_t n0 = syncs->value();
  REQUIRE(kv->Sync().ok());
  CHECK(syncs->value() == n0 + 1);
  REQUIRE(kv->Sync().ok());
  CHECK(syncs->value() == n0 + 1);
  REQUIRE(kv->Put("b", "1", true).ok());  // a synced write counts itself
  CHECK(syncs->value() == n0 + 2);
}

TEST_CASE("postgres: more threads than connections share the pool") {
  auto kv = Open(NewKeyspace(), 2);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        std::string k = kelp::StrCat("t", t, "/", i);
        if (!kv->Put(k, "v").ok() || !kv->Get(k).ok()) ++failures;
        // A scan held open while the same thread writes needs a second connection.
        auto it = kv->Scan(kelp::StrCat("t", t, "/"), kelp::StrCat("t", t, "0"));
        if (!kv->Put(k + "x", "v").ok()) ++failures;
        int n = 0;
        for (; it->Valid(); it->Next()) ++n;
        if (!it->status().ok() || n == 0) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(failures == 0);
  CHECK(*kv->Count("t", "u") == 8 * 50 * 2);
}

TEST_CASE("postgres: the table DDL per flavor") {
  CHECK(PgCreateTableSql("postgres", "kelp") ==
        "CREATE TABLE IF NOT EXISTS kelp (k BYTEA NOT NULL, v BYTEA NOT NULL, PRIMARY KEY (k))");
  CHECK(PgCreateTableSql("yugabytedb", "kelp").find("PRIMARY KEY (k ASC)") != std::string::npos);
}
