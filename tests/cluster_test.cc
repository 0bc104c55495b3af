// Issue 2 end to end: a filer and three volume servers as real processes on loopback.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <set>
#include <mutex>
#include <thread>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "shared/file_id.h"
#include "shared/http/http_client.h"
#include "shared/strings.h"
#include "tests/harness/cluster.h"

using namespace kelp;
using namespace kelp::testing;
using nlohmann::json;

namespace {

// Volume servers on one rack, and blob-level helpers over the filer's master API.
class Cluster : public TestCluster {
 public:
  explicit Cluster(int volumes, int volume_size_limit_mb = 1000, int max_volumes = 8)
      : TestCluster(Make(volumes, volume_size_limit_mb, max_volumes)) {}

  static Options Make(int volumes, int volume_size_limit_mb, int max_volumes) {
    Options o;
    o.volumes = volumes;
    o.filer_flags = {StrCat("-volumeSizeLimitMB=", volume_size_limit_mb), "-pulseMs=300"};
    o.volume_flags = {StrCat("-max=", max_volumes), StrCat("-volumeSizeLimitMB=", volume_size_limit_mb),
                      "-rack=rack1", "-fileSizeLimitMB=4"};
    o.name = "kelp-cluster-test";
    return o;
  }

  int AliveServers() { return AliveVolumes(); }
  http::HttpClient& client() { return http(); }

  // Assign + upload; returns the fid or an error.
  absl::StatusOr<std::string> Write(const std::string& data, const std::string& replication = "") {
    auto a = http().Get(filer(), StrCat("/dir/assign?replication=", replication));
    if (!a.ok()) return a.status();
    if (a->status != 200) return absl::UnavailableError(StrCat("assign: ", a->status, " ", a->body));
    json j = json::parse(a->body);
    std::string fid = j["fid"], url = j["url"];
    auto p = http().Do("PUT", url, "/" + fid, {}, data);
    if (!p.ok()) return p.status();
    if (p->status != 201) return absl::UnavailableError(StrCat("upload: ", p->status, " ", p->body));
    return fid;
  }

  // Reads through any live location the filer knows.
  absl::StatusOr<std::string> Read(const std::string& fid) {
    auto l = http().Get(filer(), StrCat("/dir/lookup?volumeId=", fid));
    if (!l.ok()) return l.status();
    if (l->status != 200) return absl::NotFoundError(StrCat("lookup ", fid, ": ", l->body));
    absl::Status last = absl::NotFoundError(StrCat("no locations in ", l->body));
    json reply = json::parse(l->body);
    for (const auto& loc : reply["locations"]) {
      auto g = http().Get(loc["url"].get<std::string>(), "/" + fid);
      if (g.ok() && g->status == 200) return g->body;
      last = g.ok() ? absl::UnavailableError(StrCat("GET ", fid, ": ", g->status)) : g.status();
    }
    return last;
  }
};

}  // namespace

TEST_CASE("write, read and delete blobs over HTTP") {
  Cluster c(3);
  std::map<std::string, std::string> written;
  for (int i = 0; i < 50; ++i) {
    std::string data = RandomBytes(1 + i * 997, i);
    auto fid = c.Write(data);
    REQUIRE(fid.ok());
    written[*fid] = data;
  }
  for (const auto& [fid, data] : written) {
    auto got = c.Read(fid);
    INFO(fid << ": " << got.status().ToString());
    REQUIRE(got.ok());
    CHECK(*got == data);
  }
  // Delete one: it is gone; the others are not.
  std::string victim = written.begin()->first;
  auto l = c.client().Get(c.filer(), "/dir/lookup?volumeId=" + victim);
  std::string url = json::parse(l->body)["locations"][0]["url"];
  auto d = c.client().Do("DELETE", url, "/" + victim);
  REQUIRE(d.ok());
  CHECK(d->status == 202);
  CHECK(c.client().Get(url, "/" + victim)->status == 404);
  CHECK(c.client().Do("DELETE", url, "/" + victim)->status == 404);
  CHECK(*c.Read(std::next(written.begin())->first) == std::next(written.begin())->second);
}

TEST_CASE("kill -9 of a volume server during writes loses nothing acknowledged") {
  Cluster c(3);
  std::mutex mu;
  std::map<std::string, std::string> acked;
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&, t] {
      for (uint64_t i = 0; !stop; ++i) {
        std::string data = RandomBytes(512 + (i % 7) * 1000, t * 1000003 + i);
        auto fid = c.Write(data);
        if (!fid.ok()) {
          failures++;
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          continue;
        }
        std::lock_guard lock(mu);
        acked[*fid] = data;
      }
    });
  }
  // Each phase lasts until the writers have had more writes acknowledged in it: before the
  // kill, while the server is down (writes go on to the other two), and after it is back.
  auto acked_count = [&] {
    std::lock_guard lock(mu);
    return acked.size();
  };
  auto more_acked = [&](size_t n) {
    size_t from = acked_count();
    return WaitFor([&] { return acked_count() >= from + n; }, std::chrono::seconds(60));
  };
  CHECK(more_acked(50));
  c.KillVolume(1);
  CHECK(more_acked(50));
  c.StartVolume(1);
  CHECK(WaitFor([&] { return c.AliveServers() == 3; }, std::chrono::seconds(20)));
  CHECK(more_acked(50));
  stop = true;
  for (auto& t : writers) t.join();
  REQUIRE(WaitFor([&] { return c.AliveServers() == 3; }, std::chrono::seconds(20)));
  INFO("acknowledged " << acked.size() << " blobs, " << failures.load() << " writes failed and were retried");
  REQUIRE(acked.size() > 100);
  for (const auto& [fid, data] : acked) {
    auto got = c.Read(fid);
    INFO(fid << ": " << got.status().ToString());
    REQUIRE(got.ok());
    REQUIRE(*got == data);
  }
}

TEST_CASE("a small volume size limit forces new volumes") {
  Cluster c(3, /*volume_size_limit_mb=*/1, /*max_volumes=*/30);
  std::map<std::string, std::string> written;
  std::set<uint32_t> vids;
  for (int i = 0; i < 60; ++i) {
    std::string data = RandomBytes(100 * 1024, i);
    absl::StatusOr<std::string> fid;
    // A volume that just filled up refuses uploads ("is full", 403) until the filer hears so
    // at the next heartbeat and assigns another: retry until then, like a client would.
    // Any other failure ends the test.
    WaitFor(
        [&] {
          fid = c.Write(data);
          return fid.ok() || fid.status().message().find("is full") == std::string_view::npos;
        },
        std::chrono::seconds(30));
    INFO(fid.status().ToString());
    REQUIRE(fid.ok());
    written[*fid] = data;
    vids.insert(FileId::Parse(*fid)->volume_id);
  }
  // 6 MB of data in 1 MB volumes: at least 6 volumes were used.
  CHECK(vids.size() >= 6);
  for (const auto& [fid, data] : written) CHECK(*c.Read(fid) == data);
}

TEST_CASE("replication 001 survives a dead replica: reads continue, writes go to healthy volumes") {
  Cluster c(3);
  std::map<std::string, std::string> written;
  for (int i = 0; i < 40; ++i) {
    std::string data = RandomBytes(4096, 7000 + i);
    auto fid = c.Write(data, "001");
    REQUIRE(fid.ok());
    written[*fid] = data;
  }
  // Every blob is on two servers.
  for (const auto& [fid, data] : written) {
    auto l = c.client().Get(c.filer(), "/dir/lookup?volumeId=" + fid);
    REQUIRE(json::parse(l->body)["locations"].size() == 2);
  }
  c.KillVolume(0);
  REQUIRE(WaitFor([&] { return c.AliveServers() == 2; }, std::chrono::seconds(20)));
  for (const auto& [fid, data] : written) {
    auto got = c.Read(fid);
    INFO(fid << ": " << got.status().ToString());
    REQUIRE(got.ok());
    CHECK(*got == data);
  }
  for (int i = 0; i < 20; ++i) {
    std::string data = RandomBytes(2048, 9000 + i);
    auto fid = c.Write(data, "001");
    REQUIRE(fid.ok());
    CHECK(*c.Read(*fid) == data);
  }
}

TEST_CASE("bad input gets 4xx and the volume server stays up") {
  Cluster c(1);
  std::string data = "hello kelp";
  auto fid = c.Write(data);
  REQUIRE(fid.ok());
  std::string url = c.volume(0);
  auto& h = c.client();
  CHECK(h.Get(url, "/not-a-fid")->status == 400);
  CHECK(h.Get(url, "/3,zz")->status == 400);
  // Same key, wrong cookie: not found, never the data.
  auto id = *FileId::Parse(*fid);
  FileId wrong = id;
  wrong.cookie ^= 1;
  auto w = h.Get(url, "/" + wrong.ToString());
  CHECK(w->status == 404);
  CHECK(w->body.find("hello") == std::string::npos);
  http::Headers range;
  range.Add("Range", "bytes=100-200");
  CHECK(h.Do("GET", url, "/" + *fid, range)->status == 416);
  http::Headers ok_range;
  ok_range.Add("Range", "bytes=6-9");
  auto part = h.Do("GET", url, "/" + *fid, ok_range);
  CHECK(part->status == 206);
  CHECK(part->body == "kelp");
  auto big = h.Do("PUT", url, "/" + FileId{id.volume_id, id.key + 1, 7}.ToString(), {}, std::string(5 << 20, 'x'));
  CHECK((!big.ok() || big->status == 413));
  // Garbage bytes on a raw socket: a 400, then the connection closes.
  for (std::string garbage : {std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 15),
                              std::string("GET /%zz HTTP/1.1\r\nHost: x\r\n\r\n"),
                              std::string("PUT /" + *fid + " HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n")}) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(c.volume_port(0));
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    timeval tv{5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    send(fd, garbage.data(), garbage.size(), MSG_NOSIGNAL);
    std::string reply;
    char buf[4096];
    ssize_t n;
    while ((n = recv(fd, buf, sizeof buf, 0)) > 0) reply.append(buf, n);
    close(fd);
    CHECK(reply.rfind("HTTP/1.1 400", 0) == 0);
  }
  // The server is still up, and the blob was not touched by any of it.
  CHECK(*c.Read(*fid) == data);
}
