// The HTTP data plane end to end, against a real VolumeServer on a free loopback port.
#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "shared/file_id.h"
#include "shared/hash.h"
#include "shared/status.h"
#include "volume/client/local_reader.h"
#include "volume/server/test_server.h"
#include "volume/store/fault_env.h"

using namespace kelp::volume;
using namespace kelp::volume::testing;
using kelp::FileId;

namespace {

std::string Fid(uint32_t vid, uint64_t key, uint32_t cookie) {
  return FileId{vid, key, cookie}.ToString();
}

std::string Etag(std::string_view data) { return fmt::format("\"{:016x}\"", kelp::Hash64(data)); }

}  // namespace

TEST_CASE("write, read, head and delete over HTTP") {
  TestServer t;
  REQUIRE(t.server->store().Allocate(3, "", "000").ok());
  const std::string fid = Fid(3, 0x01, 0x637037d6);
  REQUIRE(fid == "3,01637037d6");
  std::string data = RandomBlob(1, 1024);

  auto put = t.Do("PUT", "/" + fid, data);
  CHECK(put.status == 201);
  CHECK(put.body ==
        fmt::format("{{\"name\":\"\",\"size\":1024,\"eTag\":\"{:016x}\"}}\n", kelp::Hash64(data)));
  CHECK(put.headers.Get("ETag") == Etag(data));

  auto get = t.Do("GET", "/" + fid);
  CHECK(get.status == 200);
  CHECK(get.body == data);
  CHECK(get.headers.Get("ETag") == Etag(data));
  CHECK(get.headers.Get("Accept-Ranges") == "bytes");
  CHECK_FALSE(get.headers.Get("Last-Modified").empty());

  // The other spellings of the same fid.
  for (std::string path :
       {"/3/01637037d6", "/3,01637037d6.jpg", "/3/01637037d6.jpg", "/3/01637037d6/cat.jpg"}) {
    INFO(path);
    auto r = t.Do("GET", path);
    CHECK(r.status == 200);
    CHECK(r.body == data);
  }

  auto head = t.Do("HEAD", "/" + fid);
  CHECK(head.status == 200);
  CHECK(head.body.empty());
  CHECK(head.headers.Get("Content-Length") == "1024");

  // POST works like PUT, and overwrites.
  auto post = t.Do("POST", "/" + fid, "v2");
  CHECK(post.status == 201);
  CHECK(t.Do("GET", "/" + fid).body == "v2");

  auto del = t.Do("DELETE", "/" + fid);
  CHECK(del.status == 202);
  CHECK(del.body == "{\"size\":2}\n");
  CHECK(t.Do("GET", "/" + fid).status == 404);
  CHECK(t.Do("DELETE", "/" + fid).status == 404);
}

TEST_CASE("Range, ETag and If-None-Match") {
  TestServer t;
  REQUIRE(t.server->store().Allocate(1, "", "000").ok());
  std::string data = RandomBlob(2, 1000);
  std::string fid = "/" + Fid(1, 7, 42);
  REQUIRE(t.Do("PUT", fid, data).status == 201);
  auto ranged = [&](std::string range) {
    kelp::http::Headers h;
    h.Set("Range", range);
    return t.Do("GET", fid, {}, h);
  };
  auto r = ranged("bytes=0-9");
  CHECK(r.status == 206);
  CHECK(r.body == data.substr(0, 10));
  CHECK(r.headers.Get("Content-Range") == "bytes 0-9/1000");
  r = ranged("bytes=990-");
  CHECK(r.status == 206);
  CHECK(r.body == data.substr(990));
  r = ranged("bytes=-5");
  CHECK(r.status == 206);
  CHECK(r.body == data.substr(995));
  CHECK(r.headers.Get("Content-Range") == "bytes 995-999/1000");
  r = ranged("bytes=500-99999");
  CHECK(r.status == 206);
  CHECK(r.body == data.substr(500));
  r = ranged("bytes=1000-");
  CHECK(r.status == 416);
  CHECK(r.headers.Get("Content-Range") == "bytes */1000");
  CHECK(ranged("bytes=abc").status == 416);
  CHECK(ranged("bytes=9-3").status == 416);
  CHECK(ranged("pages=1-2").status == 416);
  r = ranged("bytes=0-1,5-6");  // multi-range: the whole blob
  CHECK(r.status == 200);
  CHECK(r.body == data);

  kelp::http::Headers inm;
  inm.Set("If-None-Match", Etag(data));
  r = t.Do("GET", fid, {}, inm);
  CHECK(r.status == 304);
  CHECK(r.body.empty());
  inm.Set("If-None-Match", "\"0000000000000000\", W/" + Etag(data));
  CHECK(t.Do("GET", fid, {}, inm).status == 304);
  inm.Set("If-None-Match", "\"0000000000000000\"");
  CHECK(t.Do("GET", fid, {}, inm).status == 200);
}

TEST_CASE("bad requests get 4xx and reveal nothing, the server stays up") {
  TestServer t(nullptr, [](VolumeServer::Options& o) { o.file_size_limit_mb = 1; });
  REQUIRE(t.server->store().Allocate(1, "", "000").ok());
  std::string secret = "the secret blob";
  REQUIRE(t.Do("PUT", "/" + Fid(1, 9, 0x11111111), secret).status == 201);

  SECTION("wrong cookie") {
    auto r = t.Do("GET", "/" + Fid(1, 9, 0x22222222));
    CHECK(r.status == 404);
    CHECK(r.body.find(secret) == std::string::npos);
    CHECK(t.Do("HEAD", "/" + Fid(1, 9, 0x22222222)).status == 404);
    CHECK(t.Do("DELETE", "/" + Fid(1, 9, 0x22222222)).status == 404);
    CHECK(t.Do("PUT", "/" + Fid(1, 9, 0x22222222), "overwrite").status == 409);
    CHECK(t.Do("GET", "/" + Fid(1, 9, 0x11111111)).body == secret);
  }
  SECTION("malformed fids") {
    for (std::string path : {"/", "/nonsense", "/1,", "/1,zz11111111", "/0,0911111111", "/1,09",
                             "/a,0911111111", "/1/2/3/4", "/1,0911111111/x"}) {
      INFO(path);
      CHECK(t.Do("GET", path).status == 400);
      CHECK(t.Do("PUT", path, "x").status == 400);
    }
  }
  SECTION("unknown volume and method") {
    CHECK(t.Do("GET", "/" + Fid(99, 1, 1)).status == 404);
    CHECK(t.Do("PUT", "/" + Fid(99, 1, 1), "x").status == 404);
    CHECK(t.Do("PATCH", "/" + Fid(1, 9, 0x11111111), "x").status == 405);
  }
  SECTION("oversize body") {
    std::string big((1 << 20) + 1, 'x');
    // The server answers before reading the body and closes; the client still gets the 413.
    auto r = t.client.Do("PUT", t.addr(), "/" + Fid(1, 10, 1), {}, big);
    REQUIRE(r.ok());
    CHECK(r->status == 413);
    std::string huge(5 << 20, 'x');
    r = t.client.Do("PUT", t.addr(), "/" + Fid(1, 10, 1), {}, huge);
    REQUIRE(r.ok());
    CHECK(r->status == 413);
    CHECK_FALSE(t.server->store().Get(1)->SizeOf(10).has_value());
    std::string just_fits(1 << 20, 'y');
    CHECK(t.Do("PUT", "/" + Fid(1, 11, 1), just_fits).status == 201);
  }
  SECTION("garbage bytes on the socket") {
    std::string reply =
        RawExchange(t.addr(), std::string("\x16\x03\x01\x02\x00garbage\r\n\r\n", 16));
    CHECK(reply.rfind("HTTP/1.1 400", 0) == 0);
    reply = RawExchange(t.addr(), "GET /1,0911111111 HTTP/1.1\r\nContent-Length: -5\r\n\r\n");
    CHECK(reply.rfind("HTTP/1.1 400", 0) == 0);
    reply = RawExchange(t.addr(), "NOT HTTP AT ALL\r\n\r\n");
    CHECK(reply.rfind("HTTP/1.1 4", 0) == 0);
  }
  // Whatever happened above, the server still answers.
  CHECK(t.Do("GET", "/" + Fid(1, 9, 0x11111111)).body == secret);
}

TEST_CASE("multipart uploads as curl -F sends them") {
  TestServer t;
  REQUIRE(t.server->store().Allocate(2, "", "000").ok());
  std::string content = RandomBlob(5, 300) + "\r\n--not-the-boundary\r\n";
  std::string body =
      "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"cat.jpg\"\r\n"
      "Content-Type: image/jpeg\r\n\r\n" +
      content + "\r\n--XyZ--\r\n";
  kelp::http::Headers h;
  h.Set("Content-Type", "multipart/form-data; boundary=XyZ");
  auto r = t.Do("POST", "/" + Fid(2, 1, 1), body, h);
  REQUIRE(r.status == 201);
  CHECK(r.body.find("\"name\":\"cat.jpg\"") != std::string::npos);
  CHECK(r.body.find(kelp::StrCat("\"size\":", content.size())) != std::string::npos);
  CHECK(t.Do("GET", "/" + Fid(2, 1, 1)).body == content);
  h.Set("Content-Type", "multipart/form-data");  // no boundary
  CHECK(t.Do("POST", "/" + Fid(2, 2, 1), body, h).status == 400);
}

TEST_CASE("large blobs stream, with ranges, through worker threads") {
  TestServer t;
  REQUIRE(t.server->store().Allocate(1, "", "000").ok());
  for (size_t size : {size_t{100} << 10, size_t{6} << 20}) {
    INFO("size " << size);
    std::string data = RandomBlob(size, size);
    std::string fid = "/" + Fid(1, size, 5);
    REQUIRE(t.Do("PUT", fid + "?fsync=true", data).status == 201);
    auto r = t.Do("GET", fid);
    CHECK(r.status == 200);
    CHECK(r.body == data);
    kelp::http::Headers h;
    h.Set("Range", "bytes=65000-2000000");
    r = t.Do("GET", fid, {}, h);
    CHECK(r.status == 206);
    CHECK(r.body == data.substr(65000, 2000000 - 65000 + 1));
    CHECK(t.Do("HEAD", fid).headers.Get("Content-Length") == std::to_string(size));
  }
}

TEST_CASE("uploads of every size in turn store exactly their own bytes (pooled body buffers)") {
  TestServer t;
  REQUIRE(t.server->store().Allocate(1, "", "000").ok());
  // Large, smaller (into a buffer a larger one left), empty, beyond the kept size, tiny, large.
  const size_t sizes[] = {size_t{4} << 20, (size_t{2} << 20) + 3, 0, size_t{9} << 20, 17, (size_t{4} << 20) - 1};
  uint64_t key = 100;
  for (size_t size : sizes) {
    INFO("size " << size);
    std::string data = RandomBlob(key, size);
    std::string fid = "/" + Fid(1, key++, 9);
    auto put = t.Do("PUT", fid, data);
    REQUIRE(put.status == 201);
    CHECK(put.headers.Get("ETag") == Etag(data));
    auto r = t.Do("GET", fid);
    CHECK(r.status == 200);
    CHECK(r.body.size() == size);
    CHECK(r.body == data);
  }
}

TEST_CASE("a corrupt needle is a 500 and counted, never data") {
  TestServer t;
  auto v = t.server->store().Allocate(1, "", "000");
  REQUIRE(v.ok());
  std::string data(2000, 'd');
  REQUIRE(t.Do("PUT", "/" + Fid(1, 1, 1), data).status == 201);
  auto h = (*v)->Find(1);
  REQUIRE(h.has_value());
  int fd = open((t.dir.path() + "/1.dat").c_str(), O_RDWR);
  REQUIRE(fd >= 0);
  REQUIRE(pwrite(fd, "D", 1, h->data_offset() + 100) == 1);
  close(fd);
  auto r = t.Do("GET", "/" + Fid(1, 1, 1));
  CHECK(r.status == 500);
  CHECK(r.body.find("ddddd") == std::string::npos);
  auto m = t.Do("GET", "/metrics");
  CHECK(m.body.find("kelp_volume_checksum_failures_total ") != std::string::npos);
  CHECK(m.body.find("kelp_volume_checksum_failures_total 0\n") == std::string::npos);
}

TEST_CASE("a ranged GET of a large blob damaged after its first read is a 500 for the damaged block") {
  TestServer t;
  auto v = t.server->store().Allocate(1, "", "000");
  REQUIRE(v.ok());
  std::string data = RandomBlob(3, 1 << 20);
  std::string fid = "/" + Fid(1, 3, 3);
  REQUIRE(t.Do("PUT", fid, data).status == 201);
  auto ranged = [&](uint64_t from, uint64_t to) {
    kelp::http::Headers h;
    h.Set("Range", kelp::StrCat("bytes=", from, "-", to));
    return t.Do("GET", fid, {}, h);
  };
  auto r = ranged(1000, 1999);
  CHECK(r.status == 206);
  CHECK(r.body == data.substr(1000, 1000));
  CHECK(r.headers.Get("ETag") == Etag(data));
  auto h = (*v)->Find(3);
  REQUIRE(h.has_value());
  int fd = open((t.dir.path() + "/1.dat").c_str(), O_RDWR);
  REQUIRE(fd >= 0);
  REQUIRE(pwrite(fd, "X", 1, h->data_offset() + 700000) == 1);
  close(fd);
  r = ranged(699990, 700010);
  CHECK(r.status == 500);
  CHECK(r.body.find(data.substr(699990, 10)) == std::string::npos);
  r = ranged(100, 199);  // the whole needle is verified again, and it is damaged
  CHECK(r.status == 500);
}

TEST_CASE(
    "a GET with X-Kelp-Local-Read says where the needle is in which file, and sends no data") {
  TestServer t;
  REQUIRE(t.server->store().Allocate(3, "", "000").ok());
  const std::string fid = Fid(3, 0x22, 0x1234);
  std::string data = RandomBlob(5, 100000);
  REQUIRE(t.Do("PUT", "/" + fid, data).status == 201);
  REQUIRE(t.Do("PUT", "/" + Fid(3, 0x23, 0x1234), RandomBlob(6, 777)).status == 201);
  kelp::http::Headers local;
  local.Set(kLocalReadHeader, "1");
  auto r = t.Do("GET", "/" + fid, {}, local);
  REQUIRE(r.status == 200);
  CHECK(r.body.empty());
  auto loc = ParseNeedleLocation(r.headers);
  REQUIRE(loc.ok());
  CHECK(loc->size == data.size());
  CHECK(loc->dat_path == t.dir.path() + "/3.dat");
  std::string in(data.size(), 'x');
  int fd = ::open(loc->dat_path.c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  CHECK(::pread(fd, in.data(), in.size(), loc->offset + 16) == static_cast<ssize_t>(in.size()));
  ::close(fd);
  CHECK(in == data);

  CHECK(t.Do("GET", "/" + Fid(3, 0x22, 0x1235), {}, local).status == 404);  // another cookie
  CHECK(t.Do("GET", "/" + Fid(3, 0x99, 0x1234), {}, local).status == 404);
  CHECK(t.Do("GET", "/" + Fid(4, 0x22, 0x1234), {}, local).status == 404);
  CHECK(t.Do("GET", "/3,zz", {}, local).status == 400);
  REQUIRE(t.Do("DELETE", "/" + fid).status == 202);
  CHECK(t.Do("GET", "/" + fid, {}, local).status == 404);
}

TEST_CASE("a volume on files no other process sees answers no local read") {
  FaultEnv env;
  TestServer t(nullptr, [&](VolumeServer::Options& o) { o.env = &env; });
  REQUIRE(t.server->store().Allocate(1, "", "000").ok());
  REQUIRE(t.Do("PUT", "/" + Fid(1, 1, 9), RandomBlob(1, 1024)).status == 201);
  kelp::http::Headers local;
  local.Set(kLocalReadHeader, "1");
  CHECK(t.Do("GET", "/" + Fid(1, 1, 9), {}, local).status == 403);
  CHECK(t.Do("GET", "/" + Fid(1, 1, 9)).body == RandomBlob(1, 1024));
}

TEST_CASE("a full disk answers 507 and loses nothing acknowledged") {
  FaultEnv env;
  TestServer t(nullptr, [&](VolumeServer::Options& o) { o.env = &env; });
  REQUIRE(t.server->store().Allocate(1, "", "000").ok());
  for (uint64_t k = 1; k <= 5; ++k)
    REQUIRE(t.Do("PUT", "/" + Fid(1, k, 9), RandomBlob(k, 1024)).status == 201);
  env.SetWriteBudget(600);
  CHECK(t.Do("PUT", "/" + Fid(1, 6, 9), RandomBlob(6, 1024)).status == 507);
  CHECK(t.Do("PUT", "/" + Fid(1, 6, 9) + "?fsync=true", RandomBlob(6, 1024)).status == 507);
  CHECK(t.Do("GET", "/" + Fid(1, 6, 9)).status == 404);
  for (uint64_t k = 1; k <= 5; ++k)
    CHECK(t.Do("GET", "/" + Fid(1, k, 9)).body == RandomBlob(k, 1024));
  env.SetWriteBudget(-1);
  CHECK(t.Do("PUT", "/" + Fid(1, 6, 9), RandomBlob(6, 1024)).status == 201);
}

TEST_CASE("a full volume turns read-only: 403 on write, reads go on") {
  TestServer t(nullptr, [](VolumeServer::Options& o) { o.volume_size_limit_mb = 1; });
  REQUIRE(t.server->store().Allocate(1, "", "000").ok());
  std::string blob(300 << 10, 'f');
  int code = 201;
  uint64_t k = 0;
  while (code == 201 && k < 10) code = t.Do("PUT", "/" + Fid(1, ++k, 1), blob).status;
  CHECK(code == 403);
  CHECK(t.Do("GET", "/" + Fid(1, 1, 1)).body == blob);
}

TEST_CASE("/status and /metrics") {
  TestServer t;
  REQUIRE(t.server->store().Allocate(4, "pics", "000").ok());
  REQUIRE(t.Do("PUT", "/" + Fid(4, 1, 1), "hello").status == 201);
  REQUIRE(t.Do("GET", "/" + Fid(4, 1, 1)).status == 200);
  auto s = t.Do("GET", "/status");
  CHECK(s.status == 200);
  CHECK(s.headers.Get("Content-Type") == "application/json");
  CHECK(s.body.find("\"Id\":4,\"Collection\":\"pics\"") != std::string::npos);
  CHECK(s.body.find("\"FileCount\":1") != std::string::npos);
  CHECK(s.body.find("\"DiskStatuses\":[{\"Dir\":") != std::string::npos);
  auto m = t.Do("GET", "/metrics");
  CHECK(m.status == 200);
  CHECK(m.body.find("kelp_volume_requests_total{method=\"PUT\",code=\"201\"}") !=
        std::string::npos);
  CHECK(m.body.find("kelp_volume_requests_total{method=\"GET\",code=\"200\"}") !=
        std::string::npos);
  CHECK(m.body.find("kelp_volume_request_seconds_bucket") != std::string::npos);
  CHECK(m.body.find("kelp_volume_needles{server=\"" + t.addr() + "\"} 1") != std::string::npos);
  CHECK(m.body.find("kelp_volume_resident_bytes{server=\"" + t.addr() + "\"}") !=
        std::string::npos);
}

TEST_CASE("volumes and their data survive a server restart") {
  TempDir dir;
  std::string data = RandomBlob(77, 5000);
  for (int round = 0; round < 2; ++round) {
    VolumeServer server(TestOptions(dir.path()));
    REQUIRE(server.Start().ok());
    kelp::http::HttpClient c;
    if (round == 0) {
      REQUIRE(server.store().Allocate(8, "", "000").ok());
      auto r = c.Do("PUT", server.url(), "/" + Fid(8, 3, 3) + "?fsync=true", {}, data);
      REQUIRE(r.ok());
      REQUIRE(r->status == 201);
    } else {
      auto r = c.Get(server.url(), "/" + Fid(8, 3, 3));
      REQUIRE(r.ok());
      CHECK(r->body == data);
    }
  }
}

TEST_CASE("POST /sync makes lazy writes durable: one fdatasync per volume, none if clean") {
  FaultEnv env;
  TestServer t(nullptr, [&](VolumeServer::Options& o) { o.env = &env; });
  REQUIRE(t.server->store().Allocate(1, "", "000").ok());
  REQUIRE(t.server->store().Allocate(2, "", "000").ok());
  for (uint64_t k = 1; k <= 6; ++k) {
    REQUIRE(t.Do("PUT", "/" + Fid(1 + k % 2, k, 9), RandomBlob(k, 4096)).status == 201);
  }
  // The first sync of a volume opened by this process may sync once more than needed (see
  // Volume::Sync); writes after it are what this test counts.
  REQUIRE(t.Do("POST", "/sync?volumes=1,2").status == 200);
  const int base = env.data_syncs();
  REQUIRE(t.Do("PUT", "/" + Fid(1, 10, 9), RandomBlob(10, 4096)).status == 201);
  REQUIRE(t.Do("PUT", "/" + Fid(2, 11, 9), RandomBlob(11, 4096)).status == 201);
  REQUIRE(t.Do("PUT", "/" + Fid(2, 12, 9), RandomBlob(12, 4096)).status == 201);
  CHECK(env.data_syncs() == base);  // lazy writes do not sync
  auto r = t.Do("POST", "/sync?volumes=1,2");
  CHECK(r.status == 200);
  CHECK(r.body == "{\"synced\":2}\n");
  CHECK(env.data_syncs() == base + 2);
  CHECK(t.Do("POST", "/sync?volumes=2,1,2").status == 200);  // nothing new: no fdatasync
  CHECK(env.data_syncs() == base + 2);
  auto m = t.Do("GET", "/metrics");
  CHECK(m.body.find("kelp_volume_requests_total{method=\"POST\",code=\"200\"}") !=
        std::string::npos);

  CHECK(t.Do("POST", "/sync?volumes=7").status == 404);
  CHECK(t.Do("POST", "/sync?volumes=1,x").status == 400);
  CHECK(t.Do("POST", "/sync?volumes=").status == 400);
  CHECK(t.Do("POST", "/sync").status == 400);
  CHECK(t.Do("GET", "/sync?volumes=1").status == 405);

  // A failed fdatasync is an error, and the volume stops accepting writes.
  REQUIRE(t.Do("PUT", "/" + Fid(1, 13, 9), RandomBlob(13, 4096)).status == 201);
  env.SetSyncHook([] { return kelp::PosixError(EIO, "injected fdatasync failure"); });
  CHECK(t.Do("POST", "/sync?volumes=1").status == 500);
  CHECK(t.Do("PUT", "/" + Fid(1, 14, 9), RandomBlob(14, 4096)).status >= 400);
}

TEST_CASE(
    "a stream of lazy writes is synced behind itself, every kSyncBehindBytes, without a sync "
    "request") {
  FaultEnv env;
  TestServer t(nullptr, [&](VolumeServer::Options& o) { o.env = &env; });
  REQUIRE(t.server->store().Allocate(1, "", "000").ok());
  REQUIRE(t.Do("PUT", "/" + Fid(1, 1, 9), RandomBlob(1, 4096)).status == 201);
  REQUIRE(t.Do("POST", "/sync?volumes=1").status == 200);  // see the test above
  const int base = env.data_syncs();
  const std::string blob = RandomBlob(2, 8 << 20);
  const uint64_t needles = Volume::kSyncBehindBytes / blob.size() + 1;
  for (uint64_t k = 2; k < 2 + needles; ++k)
    REQUIRE(t.Do("PUT", "/" + Fid(1, k, 9), blob).status == 201);
  // The sync runs on the server's pool, after the write that asked for it answered.
  CHECK(WaitFor([&] { return env.data_syncs() > base; }));
  REQUIRE(t.Do("POST", "/sync?volumes=1").status == 200);
  auto r = t.Do("GET", "/" + Fid(1, 2 + needles - 1, 9));
  REQUIRE(r.status == 200);
  CHECK(r.body == blob);
}
