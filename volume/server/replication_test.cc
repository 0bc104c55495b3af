// Replication "001" between two in-process volume servers, which find each other through a
// fake filer fed by their own heartbeats.
#include <catch2/catch.hpp>

#include "shared/file_id.h"
#include "shared/security/jwt.h"
#include "shared/security/security.h"
#include "volume/server/test_server.h"
#include "volume/store/fault_env.h"

using namespace kelp::volume;
using namespace kelp::volume::testing;
using kelp::FileId;

namespace {

struct Pair {
  FakeCluster cluster;
  std::unique_ptr<TestServer> a, b;
  Pair() {
    REQUIRE(cluster.Start().ok());
    a = std::make_unique<TestServer>(&cluster);
    b = std::make_unique<TestServer>(&cluster);
    REQUIRE(a->server->store().Allocate(5, "", "001").ok());
    REQUIRE(b->server->store().Allocate(5, "", "001").ok());
    REQUIRE(WaitFor([&] { return cluster.Holders(5).size() == 2; }));
  }
};

std::string Path(uint64_t key, uint32_t cookie = 0xabcd) {
  return "/" + FileId{5, key, cookie}.ToString();
}

}  // namespace

TEST_CASE("a write to either copy reaches both, so does a delete") {
  Pair p;
  std::string data = RandomBlob(1, 3000);
  auto r = p.a->Do("PUT", Path(1), data);
  REQUIRE(r.status == 201);
  CHECK(p.b->Do("GET", Path(1)).body == data);
  CHECK(p.a->Do("GET", Path(1)).body == data);

  REQUIRE(p.b->Do("PUT", Path(2) + "?fsync=true", "via b").status == 201);
  CHECK(p.a->Do("GET", Path(2)).body == "via b");

  CHECK(p.a->Do("DELETE", Path(1)).status == 202);
  CHECK(p.a->Do("GET", Path(1)).status == 404);
  CHECK(p.b->Do("GET", Path(1)).status == 404);
}

TEST_CASE("a replica write is not forwarded again") {
  Pair p;
  REQUIRE(p.b->Do("PUT", Path(3) + "?type=replicate", "only b").status == 201);
  CHECK(p.b->Do("GET", Path(3)).body == "only b");
  CHECK(p.a->Do("GET", Path(3)).status == 404);
  REQUIRE(p.b->Do("DELETE", Path(3) + "?type=replicate").status == 202);
}

TEST_CASE("an unreachable replica fails the write with a 5xx and leaves no orphan") {
  Pair p;
  SECTION("the replica is down") {
    REQUIRE(p.a->Do("PUT", Path(1), "before").status == 201);
    p.b->server->Stop();
    auto r = p.a->Do("PUT", Path(4), "lost?");
    CHECK(r.status == 503);
    CHECK(p.a->Do("GET", Path(4)).status == 404);  // rolled back
    CHECK(p.a->Do("DELETE", Path(1)).status == 503);
    CHECK(p.a->Do("GET", Path(1)).status == 404);  // deleted here; the client must retry
  }
  SECTION("the filer knows no live replica") {
    p.cluster.OverrideLocations(5, {p.a->addr()});
    CHECK(p.a->Do("PUT", Path(4), "x").status == 503);
    CHECK(p.a->Do("GET", Path(4)).status == 404);
    p.cluster.OverrideLocations(5, {p.a->addr(), p.b->addr()});
    CHECK(p.a->Do("PUT", Path(4), "x").status == 201);  // the cache was refreshed on failure
    CHECK(p.b->Do("GET", Path(4)).body == "x");
  }
}

TEST_CASE("a replicated volume without a filer refuses client writes") {
  TestServer t;
  REQUIRE(t.server->store().Allocate(5, "", "001").ok());
  CHECK(t.Do("PUT", Path(1), "x").status == 503);
  CHECK(t.Do("PUT", Path(1) + "?type=replicate", "x").status == 201);
}

TEST_CASE("POST /sync syncs every copy of a replicated volume, a dead replica fails it") {
  FakeCluster cluster;
  REQUIRE(cluster.Start().ok());
  FaultEnv env_a, env_b;
  TestServer a(&cluster, [&](VolumeServer::Options& o) { o.env = &env_a; });
  TestServer b(&cluster, [&](VolumeServer::Options& o) { o.env = &env_b; });
  REQUIRE(a.server->store().Allocate(5, "", "001").ok());
  REQUIRE(b.server->store().Allocate(5, "", "001").ok());
  REQUIRE(WaitFor([&] { return cluster.Holders(5).size() == 2; }));
  REQUIRE(a.Do("PUT", Path(1), RandomBlob(1, 3000)).status == 201);
  const int sa = env_a.data_syncs(), sb = env_b.data_syncs();
  REQUIRE(a.Do("POST", "/sync?volumes=5").status == 200);
  CHECK(env_a.data_syncs() == sa + 1);
  CHECK(env_b.data_syncs() == sb + 1);
  // A replica's own sync is not forwarded.
  REQUIRE(b.Do("PUT", Path(2) + "?type=replicate", "b only").status == 201);
  REQUIRE(b.Do("POST", "/sync?volumes=5&type=replicate").status == 200);
  CHECK(env_a.data_syncs() == sa + 1);
  CHECK(env_b.data_syncs() == sb + 2);

  b.server->Stop();
  CHECK(a.Do("POST", "/sync?volumes=5").status == 503);
}

TEST_CASE("with a signing key, replicated writes need a token and the forward to the replica carries its own") {
  kelp::security::SecurityConfig cfg;
  cfg.volume_write.key = "replication-test-key-0123";
  cfg.volume_read.key = "replication-test-read-key";
  REQUIRE(kelp::security::Install(cfg, kelp::security::kVolumeComponent).ok());
  Pair p;
  auto with = [](const std::string& token) {
    kelp::http::Headers h;
    if (!token.empty()) h.Set("Authorization", "Bearer " + token);
    return h;
  };
  FileId fid{5, 9, 0xabcd};
  std::string write = kelp::security::SignFileIdToken(cfg.volume_write, fid, 1);
  std::string read = kelp::security::SignFileIdToken(cfg.volume_read, fid, 1);
  auto r = p.a->client.Do("PUT", p.a->addr(), Path(9), {}, "no token");
  REQUIRE(r.ok());
  CHECK(r->status == 401);
  r = p.a->client.Do("PUT", p.a->addr(), Path(9), with(read), "read token");
  CHECK(r->status == 401);
  CHECK(p.b->client.Do("GET", p.b->addr(), Path(9), with(read), {})->status == 404);

  r = p.a->client.Do("PUT", p.a->addr(), Path(9), with(write), "replicated");
  CHECK(r->status == 201);
  CHECK(p.b->client.Do("GET", p.b->addr(), Path(9), with(read), {})->body == "replicated");
  CHECK(p.b->client.Do("GET", p.b->addr(), Path(9), {}, {})->status == 401);
  CHECK(p.b->client.Do("DELETE", p.b->addr(), Path(9), {}, {})->status == 401);
  CHECK(p.b->client.Do("DELETE", p.b->addr(), Path(9), with(write), {})->status == 202);
  CHECK(p.a->client.Do("GET", p.a->addr(), Path(9), with(read), {})->status == 404);
  REQUIRE(kelp::security::Install({}, kelp::security::kVolumeComponent).ok());
}
