// Issue 15 end to end: a real PostgreSQL (started here), two `kelp filer -store=postgres`
// processes sharing it, and a volume server heartbeating to whichever is the coordinator
// (-filer=a,b). Changes made through one filer are seen through the other; concurrent creates
// and renames in one directory through both lose nothing; kill -9 of the coordinator in the
// middle of a workload: the other filer takes the lease, the volume server follows it, every
// acknowledged write reads back, and filer.fsck finds the namespace clean.
#include <signal.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "filer/store/testing/pg_test_server.h"
#include "shared/http/http_client.h"
#include "shared/strings.h"
#include "tests/harness/cluster.h"

using namespace kelp;
using namespace kelp::testing;
using kelp::filer::testing::PgTestServer;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

PgTestServer& Pg() { return kelp::filer::testing::SharedPgTestServer(); }

// Two filers on the test's PostgreSQL under one keyspace, and a volume server that
// heartbeats to whichever coordinates.
class SharedCluster : public TestCluster {
 public:
  explicit SharedCluster(const std::string& keyspace)
      : TestCluster(Make(keyspace)), keyspace_(keyspace) {}
  static Options Make(const std::string& keyspace) {
    Options o;
    o.filers = 2;
    o.filer_flags = {"-pulseMs=300", "-maxMB=1"};
    o.volume_flags = {"-max=20", "-pulseMs=300"};
    o.pg_dsn = Pg().dsn();
    o.pg_keyspace = keyspace;
    o.name = "kelp-multi";
    return o;
  }

  const std::string& dsn() const { return Pg().dsn(); }
  const std::string& keyspace() const { return keyspace_; }
  // Whether filer i lists a volume server alive.
  bool VolumeAliveAt(int i) { return i >= 0 && AliveVolumes(i) > 0; }

  absl::StatusOr<http::ClientResponse> Put(int i, const std::string& path, const std::string& body) {
    return http().Do("PUT", filer(i), path, {}, body);
  }
  absl::StatusOr<http::ClientResponse> Get(int i, const std::string& path) { return http().Get(filer(i), path); }
  absl::StatusOr<http::ClientResponse> Rename(int i, const std::string& from, const std::string& to) {
    return http().Do("POST", filer(i), StrCat("/api/v1/rename?path=", from), {}, json{{"newPath", to}}.dump());
  }
  std::set<std::string> List(int i, const std::string& dir) {
    std::set<std::string> names;
    auto r = http().Get(filer(i), StrCat("/api/v1/directories?path=", dir));
    REQUIRE(r.ok());
    REQUIRE(r->status == 200);
    json listing = json::parse(r->body);
    for (const auto& f : listing["files"]) names.insert(f["name"].get<std::string>());
    return names;
  }

 private:
  std::string keyspace_;
};

std::string Content(const std::string& name, size_t size) {
  return RandomBytes(size, std::hash<std::string>()(name));
}

}  // namespace

TEST_CASE("two filers on one PostgreSQL: a change through one is seen through the other") {
  SharedCluster c("e2e_seen");
  std::string body = Content("hello", 300 * 1024);
  auto put = c.Put(0, "/docs/hello.bin", body);
  REQUIRE(put.ok());
  REQUIRE(put->status == 201);
  auto get = c.Get(1, "/docs/hello.bin");
  REQUIRE(get.ok());
  REQUIRE(get->status == 200);
  CHECK(get->body == body);
  // Rename through the second, read through the first.
  auto mv = c.Rename(1, "/docs/hello.bin", "/docs/renamed.bin");
  REQUIRE(mv.ok());
  CHECK(mv->status == 200);
  CHECK(c.Get(0, "/docs/hello.bin")->status == 404);
  CHECK(c.Get(0, "/docs/renamed.bin")->body == body);
  CHECK(c.List(0, "/docs") == std::set<std::string>{"renamed.bin"});
  // Both report one coordinator, the same.
  json s0 = c.Status(0), s1 = c.Status(1);
  CHECK(s0["coordinator"]["id"] == s1["coordinator"]["id"]);
  CHECK(s0["coordinator"]["self"].get<bool>() != s1["coordinator"]["self"].get<bool>());
  CHECK(s0["store"] == "postgres");
}

TEST_CASE("two filers on one PostgreSQL: concurrent creates and renames in one directory lose nothing") {
  SharedCluster c("e2e_concurrent");
  REQUIRE(c.Put(0, "/shared/", "")->status == 201);
  const int threads = 4, files = 40;
  std::mutex mu;
  std::vector<std::string> errors;
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      for (int i = 0; i < files; ++i) {
        std::string name = StrCat("t", t, "-", i);
        std::string body = Content(name, 100 + i);
        // Created through one filer, renamed through the other.
        auto put = c.Put(t % 2, "/shared/" + name, body);
        auto mv = c.Rename((t + 1) % 2, "/shared/" + name, "/shared/r-" + name);
        std::lock_guard lock(mu);
        if (!put.ok() || put->status != 201) errors.push_back(StrCat("put ", name, ": ", put.ok() ? put->body : put.status().ToString()));
        if (!mv.ok() || mv->status != 200) errors.push_back(StrCat("rename ", name, ": ", mv.ok() ? mv->body : mv.status().ToString()));
      }
    });
  }
  for (auto& th : ts) th.join();
  for (const auto& e : errors) UNSCOPED_INFO(e);
  CHECK(errors.empty());
  std::set<std::string> want;
  for (int t = 0; t < threads; ++t) {
    for (int i = 0; i < files; ++i) want.insert(StrCat("r-t", t, "-", i));
  }
  CHECK(c.List(0, "/shared") == want);
  CHECK(c.List(1, "/shared") == want);
  for (int t = 0; t < threads; ++t) {
    std::string name = StrCat("t", t, "-", files - 1);
    CHECK(c.Get(t % 2, "/shared/r-" + name)->body == Content(name, 100 + files - 1));
  }
}

TEST_CASE("kill -9 of the coordinator filer mid-workload: the other takes over, nothing acknowledged is lost") {
  SharedCluster c("e2e_failover");
  int coord = c.Coordinator();
  REQUIRE(coord >= 0);
  int other = 1 - coord;
  std::mutex mu;
  std::map<std::string, std::string> acked;  // path -> content
  std::atomic<bool> stop{false};
  std::atomic<int> killed{0};
  std::vector<std::thread> writers;
  for (int w = 0; w < 4; ++w) {
    writers.emplace_back([&, w] {
      // Half the writers go through the coordinator until it dies, then the other filer.
      int via = w % 2 == 0 ? coord : other;
      for (int i = 0; !stop; ++i) {
        std::string path = StrCat("/work/w", w, "/f", i);
        std::string body = Content(path, 1000 + (i * 7919) % 200000);
        auto r = c.Put(via, path, body);
        if (r.ok() && r->status == 201) {
          std::lock_guard lock(mu);
          acked[path] = body;
        } else if (killed && via == coord) {
          via = other;  // what a client does when its filer is gone
        }
      }
    });
  }
  REQUIRE(WaitFor([&] { std::lock_guard lock(mu); return acked.size() >= 40; }, 60s));
  c.KillFiler(coord);
  killed = true;
  size_t at_kill;
  {
    std::lock_guard lock(mu);
    at_kill = acked.size();
  }
  // The survivor takes the lease once it expires; the volume server follows it.
  REQUIRE(WaitFor([&] { return c.Coordinator() == other && c.VolumeAliveAt(other); }, 30s));
  // Writes keep being acknowledged through the survivor (file ids from the new coordinator).
  REQUIRE(WaitFor([&] { std::lock_guard lock(mu); return acked.size() >= at_kill + 40; }, 60s));
  stop = true;
  for (auto& t : writers) t.join();

  std::map<std::string, std::string> all;
  {
    std::lock_guard lock(mu);
    all = acked;
  }
  size_t bad = 0;
  for (const auto& [path, body] : all) {
    auto r = c.Get(other, path);
    if (!r.ok() || r->status != 200 || r->body != body) {
      if (++bad <= 5) UNSCOPED_INFO(path << ": " << (r.ok() ? StrCat(r->status, " ", r->body.size()) : r.status().ToString()));
    }
  }
  CHECK(bad == 0);
  WARN(all.size() << " acknowledged writes read back, " << at_kill << " of them before the kill");
  CHECK(all.size() > at_kill);

  // Stop the survivor (it releases the lease), then check the namespace in PostgreSQL.
  REQUIRE(c.StopFiler(other) == 0);
  TempDir logs("kelp-multi-fsck");
  auto fsck = Process::Start({KelpBinary(), "filer.fsck", "-store=postgres", StrCat("-store.dsn=", c.dsn()),
                              StrCat("-store.keyspace=", c.keyspace())},
                             logs.file("fsck.log"));
  REQUIRE(fsck.ok());
  int rc = (*fsck)->Wait(120s);
  INFO((*fsck)->Log());
  CHECK(rc == 0);
  CHECK((*fsck)->Log().find("clean") != std::string::npos);
}
