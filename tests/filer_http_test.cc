// Issue 3 item 7 end to end: the filer's HTTP file APIs (SeaweedFS style and AGFS
// compatible) against a real `kelp filer` and `kelp volume` on loopback, with blobs of
// 1 MiB (-maxMB=1) so multi-chunk files stay small.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <set>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "shared/http/http_client.h"
#include "shared/strings.h"
#include "tests/harness/cluster.h"

using namespace kelp;
using namespace kelp::testing;
using nlohmann::json;

namespace {

constexpr size_t kMiB = 1 << 20;

// A filer with blobs of 1 MiB and a volume server; requests to the filer's HTTP API.
class FilerCluster : public TestCluster {
 public:
  FilerCluster()
      : TestCluster(Make()) {}
  static Options Make() {
    Options o;
    o.filer_flags = {"-maxMB=1", "-pulseMs=300"};
    o.volume_flags = {"-max=8", "-fileSizeLimitMB=4"};
    o.name = "kelp-filer-http";
    return o;
  }

  int port() const { return filer_port(); }
  bool FilerRunning() { return TestCluster::FilerRunning(0); }

  http::ClientResponse Do(std::string_view method, std::string_view target,
                          std::string_view body = {}, const http::Headers& headers = {}) {
    auto r = http().Do(method, filer(), target, headers, body);
    REQUIRE(r.ok());
    return std::move(*r);
  }
  http::ClientResponse Get(std::string_view target, const http::Headers& headers = {}) {
    return Do("GET", target, {}, headers);
  }
};

// One cluster for every case of this binary.
FilerCluster& C() {
  static FilerCluster c;
  return c;
}

json Json(const http::ClientResponse& r) {
  json j = json::parse(r.body, nullptr, false);
  INFO(r.body);
  REQUIRE(!j.is_discarded());
  return j;
}

// Sends raw bytes on a fresh connection and returns what the server answers (until it
// closes or a short timeout).
std::string RawExchange(int port, const std::string& bytes) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  timeval tv{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  REQUIRE(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size()));
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, n);
    if (out.find("\r\n\r\n") != std::string::npos) break;
  }
  close(fd);
  return out;
}

uint64_t GcDeleted() {
  json s = C().Status();
  return s.contains("gc") ? s["gc"]["deleted"].get<uint64_t>() : 0;
}

}  // namespace

TEST_CASE("seaweed: PUT and GET are byte exact, small and multi-chunk") {
  auto p = C().Do("PUT", "/docs/hello.txt", "hello, kelp\n");
  CHECK(p.status == 201);
  CHECK(Json(p)["size"] == 12);
  auto g = C().Get("/docs/hello.txt");
  CHECK(g.status == 200);
  CHECK(g.body == "hello, kelp\n");
  CHECK(g.headers.Get("Content-Type").find("text/plain") == 0);

  // 2.5 blobs of 1 MiB, POST like `curl --data-binary`.
  std::string big = RandomBytes(5 * kMiB / 2, 7);
  auto pb = C().Do("POST", "/docs/big.bin", big);
  CHECK(pb.status == 201);
  CHECK(Json(pb)["size"] == big.size());
  auto gb = C().Get("/docs/big.bin");
  REQUIRE(gb.status == 200);
  CHECK(gb.body.size() == big.size());
  CHECK(gb.body == big);

  // The data went to the volume server as blobs of at most 1 MiB.
  auto m = C().Get("/metrics");
  REQUIRE(m.status == 200);
  CHECK(m.body.find("kelp_filer_http_blob_put_bytes_total") != std::string::npos);

  // Empty bodies make empty files.
  CHECK(C().Do("PUT", "/docs/empty", "").status == 201);
  auto ge = C().Get("/docs/empty");
  CHECK(ge.status == 200);
  CHECK(ge.body.empty());
}

TEST_CASE("seaweed: Range, HEAD, ETag and If-None-Match") {
  std::string big = RandomBytes(5 * kMiB / 2, 11);
  REQUIRE(C().Do("PUT", "/range/big.bin", big).status == 201);

  auto range = [&](std::string_view spec) {
    http::Headers h;
    h.Set("Range", spec);
    return C().Get("/range/big.bin", h);
  };
  auto r = range("bytes=100-199");
  CHECK(r.status == 206);
  CHECK(r.body == big.substr(100, 100));
  CHECK(r.headers.Get("Content-Range") == StrCat("bytes 100-199/", big.size()));
  // Across the first blob boundary.
  auto across = range(StrCat("bytes=", kMiB - 5, "-", kMiB + 4));
  CHECK(across.status == 206);
  CHECK(across.body == big.substr(kMiB - 5, 10));
  auto suffix = range("bytes=-10");
  CHECK(suffix.status == 206);
  CHECK(suffix.body == big.substr(big.size() - 10));
  auto open = range(StrCat("bytes=", 2 * kMiB, "-"));
  CHECK(open.status == 206);
  CHECK(open.body == big.substr(2 * kMiB));
  CHECK(range(StrCat("bytes=", big.size(), "-")).status == 416);
  CHECK(range("bytes=abc").status == 416);
  CHECK(range("pages=1-2").status == 416);

  auto head = C().Do("HEAD", "/range/big.bin");
  CHECK(head.status == 200);
  CHECK(head.body.empty());
  CHECK(head.headers.Get("Content-Length") == std::to_string(big.size()));
  CHECK(head.headers.Get("Accept-Ranges") == "bytes");

  auto g = C().Get("/range/big.bin");
  std::string etag(g.headers.Get("ETag"));
  REQUIRE(!etag.empty());
  CHECK(etag == std::string(head.headers.Get("ETag")));
  http::Headers inm;
  inm.Set("If-None-Match", etag);
  auto nm = C().Get("/range/big.bin", inm);
  CHECK(nm.status == 304);
  CHECK(nm.body.empty());
  http::Headers other;
  other.Set("If-None-Match", "\"not-it\"");
  CHECK(C().Get("/range/big.bin", other).status == 200);

  // A new content, a new tag; the old one no longer matches.
  REQUIRE(C().Do("PUT", "/range/big.bin", "short").status == 201);
  auto g2 = C().Get("/range/big.bin", inm);
  CHECK(g2.status == 200);
  CHECK(g2.body == "short");
  CHECK(std::string(g2.headers.Get("ETag")) != etag);
}

TEST_CASE("seaweed: an overwrite replaces the content and sends the old blobs to GC") {
  std::string a = RandomBytes(3 * kMiB, 21), b = RandomBytes(kMiB + 17, 22);
  REQUIRE(C().Do("PUT", "/gc/f.bin", a).status == 201);
  uint64_t before = GcDeleted();
  REQUIRE(C().Do("PUT", "/gc/f.bin", b).status == 201);
  auto g = C().Get("/gc/f.bin");
  CHECK(g.body.size() == b.size());
  CHECK(g.body == b);
  // The three 1 MiB blobs of the first content are deleted from the volume server.
  CHECK(WaitFor([&] { return GcDeleted() >= before + 3; }, std::chrono::seconds(30)));
  // Shrinking to an inline-sized content drops the blobs of the second.
  REQUIRE(C().Do("PUT", "/gc/f.bin", "tiny").status == 201);
  CHECK(C().Get("/gc/f.bin").body == "tiny");
  CHECK(WaitFor([&] { return GcDeleted() >= before + 5; }, std::chrono::seconds(30)));
}

TEST_CASE("seaweed: listing pages with limit and lastFileName") {
  std::set<std::string> want;
  for (int i = 0; i < 25; ++i) {
    std::string name = StrCat("f", i < 10 ? "0" : "", i);
    REQUIRE(C().Do("PUT", StrCat("/list/", name), StrCat("content ", i)).status == 201);
    want.insert(name);
  }
  REQUIRE(C().Do("POST", "/list/sub/").status == 201);
  want.insert("sub");

  std::vector<std::string> got;
  std::string last;
  int pages = 0;
  for (;;) {
    auto r = C().Get(StrCat("/list/?limit=10&lastFileName=", last));
    REQUIRE(r.status == 200);
    CHECK(r.headers.Get("Content-Type").find("application/json") == 0);
    json j = Json(r);
    ++pages;
    CHECK(j["Path"] == "/list");
    CHECK(j["Limit"] == 10);
    for (const auto& e : j["Entries"]) {
      std::string full = e["FullPath"];
      REQUIRE(full.rfind("/list/", 0) == 0);
      got.push_back(full.substr(6));
      if (got.back() == "sub") {
        CHECK((e["Mode"].get<uint64_t>() & (1ull << 31)) != 0);  // Go's ModeDir
      } else {
        CHECK(e["FileSize"] == StrCat("content ", std::stoi(got.back().substr(1))).size());
        CHECK(e["Mtime"].get<std::string>().back() == 'Z');
      }
    }
    bool more = j["ShouldDisplayLoadMore"];
    if (!more) {
      CHECK(j["Entries"].size() <= 10);
      break;
    }
    CHECK(j["Entries"].size() == 10);
    last = j["LastFileName"];
    CHECK(last == got.back());
    REQUIRE(pages < 10);
  }
  CHECK(pages == 3);
  CHECK(std::is_sorted(got.begin(), got.end()));
  CHECK(std::set<std::string>(got.begin(), got.end()) == want);
  CHECK(got.size() == want.size());
  // Without a trailing slash it is the same listing.
  CHECK(Json(C().Get("/list?limit=5"))["Entries"].size() == 5);
  CHECK(C().Get("/list/?limit=abc").status == 400);
}

TEST_CASE("seaweed: DELETE, recursive or not, POST dir/ makes a directory") {
  REQUIRE(C().Do("POST", "/newdir/").status == 201);
  auto st = C().Get("/api/v1/stat?path=/newdir");
  REQUIRE(st.status == 200);
  CHECK(Json(st)["isDir"] == true);
  REQUIRE(C().Do("POST", "/newdir/a/b/").status == 201);  // mkdir -p

  REQUIRE(C().Do("PUT", "/del/x/one", "1").status == 201);
  REQUIRE(C().Do("PUT", "/del/x/two", std::string(3 * kMiB / 2, 'z')).status == 201);
  auto nr = C().Do("DELETE", "/del/x");
  CHECK(nr.status == 409);
  CHECK(Json(nr).contains("error"));
  CHECK(C().Get("/del/x/one").status == 200);
  CHECK(C().Do("DELETE", "/del/x/one").status == 204);
  CHECK(C().Get("/del/x/one").status == 404);
  CHECK(C().Do("DELETE", "/del/x?recursive=true").status == 204);
  CHECK(C().Get("/del/x").status == 404);
  CHECK(C().Get("/del/x/two").status == 404);
  CHECK(C().Do("DELETE", "/del/nothing").status == 404);
  CHECK(C().Do("DELETE", "/").status == 403);
}

TEST_CASE("cluster routes take precedence over file paths") {
  auto s = C().Get("/status");
  CHECK(s.status == 200);
  CHECK(Json(s).contains("topology"));
  auto a = C().Get("/dir/assign");
  CHECK(a.status == 200);
  CHECK(Json(a).contains("fid"));
  // A file named like a cluster route is still reachable through the AGFS dialect.
  REQUIRE(C().Do("POST", "/api/v1/directories?path=/dir").status == 201);
  REQUIRE(C().Do("PUT", "/api/v1/files?path=/dir/assign", "mine").status == 200);
  CHECK(C().Get("/api/v1/files?path=/dir/assign").body == "mine");
  CHECK(Json(C().Get("/dir/assign")).contains("fid"));
}

TEST_CASE("agfs: files, directories, stat, rename, chmod, touch, health") {
  auto h = C().Get("/api/v1/health");
  CHECK(h.status == 200);
  CHECK(Json(h)["status"] == "healthy");

  auto md = C().Do("POST", "/api/v1/directories?path=/agfs&mode=750");
  CHECK(md.status == 201);
  CHECK(Json(md)["message"] == "directory created");
  CHECK(C().Do("POST", "/api/v1/directories?path=/agfs").status == 409);
  CHECK(C().Do("POST", "/api/v1/directories?path=/agfs/x&mode=9z").status == 400);
  CHECK(C().Do("POST", "/api/v1/directories?path=/nope/x").status == 404);

  auto cf = C().Do("POST", "/api/v1/files?path=/agfs/new.txt");
  CHECK(cf.status == 201);
  CHECK(Json(cf)["message"] == "file created");
  CHECK(C().Do("POST", "/api/v1/files?path=/agfs/new.txt").status == 409);

  auto w = C().Do("PUT", "/api/v1/files?path=/agfs/data.bin", "0123456789");
  CHECK(w.status == 200);
  CHECK(Json(w)["message"] == "Written 10 bytes");
  auto r = C().Get("/api/v1/files?path=/agfs/data.bin");
  CHECK(r.status == 200);
  CHECK(r.body == "0123456789");
  CHECK(r.headers.Get("Content-Type") == "application/octet-stream");
  CHECK(C().Get("/api/v1/files?path=/agfs/data.bin&offset=3&size=4").body == "3456");
  CHECK(C().Get("/api/v1/files?path=/agfs/data.bin&offset=8").body == "89");
  CHECK(C().Get("/api/v1/files?path=/agfs/data.bin&offset=x").status == 400);
  auto missing = C().Get("/api/v1/files?path=/agfs/missing");
  CHECK(missing.status == 404);
  CHECK(Json(missing).contains("error"));
  CHECK(C().Get("/api/v1/files").status == 400);
  CHECK(C().Do("PATCH", "/api/v1/files?path=/agfs/data.bin").status == 405);
  // A multi-chunk PUT through the AGFS dialect, read back in ranges.
  std::string big = RandomBytes(2 * kMiB + 3, 31);
  REQUIRE(C().Do("PUT", "/api/v1/files?path=/agfs/big.bin", big).status == 200);
  CHECK(C().Get("/api/v1/files?path=/agfs/big.bin").body == big);
  CHECK(C().Get(StrCat("/api/v1/files?path=/agfs/big.bin&offset=", kMiB - 2, "&size=4")).body ==
        big.substr(kMiB - 2, 4));

  auto st = C().Get("/api/v1/stat?path=/agfs/data.bin");
  REQUIRE(st.status == 200);
  json sj = Json(st);
  CHECK(sj["name"] == "data.bin");
  CHECK(sj["size"] == 10);
  CHECK(sj["isDir"] == false);
  CHECK(sj["mode"] == 0644);
  CHECK(sj["modTime"].get<std::string>().back() == 'Z');
  CHECK(C().Get("/api/v1/stat?path=/agfs/missing").status == 404);
  json dj = Json(C().Get("/api/v1/stat?path=/agfs"));
  CHECK(dj["isDir"] == true);
  CHECK((dj["mode"].get<uint64_t>() & 0777) == 0750);

  auto ls = C().Get("/api/v1/directories?path=/agfs");
  REQUIRE(ls.status == 200);
  INFO(ls.body);
  std::set<std::string> names;
  json lj = Json(ls);
  for (const auto& f : lj["files"]) {
    names.insert(f["name"].get<std::string>());
    CHECK(f["meta"]["type"] == (f["isDir"].get<bool>() ? "directory" : "file"));
  }
  CHECK(names == std::set<std::string>{"big.bin", "data.bin", "new.txt"});
  CHECK(C().Get("/api/v1/directories?path=/agfs/data.bin").status != 200);
  CHECK(C().Get("/api/v1/directories?path=/agfs/missing").status == 404);

  auto rn =
      C().Do("POST", "/api/v1/rename?path=/agfs/data.bin", R"({"newPath":"/agfs/renamed.bin"})");
  CHECK(rn.status == 200);
  CHECK(Json(rn)["message"] == "renamed");
  CHECK(C().Get("/api/v1/files?path=/agfs/renamed.bin").body == "0123456789");
  CHECK(C().Get("/api/v1/files?path=/agfs/data.bin").status == 404);
  CHECK(C().Do("POST", "/api/v1/rename?path=/agfs/renamed.bin", R"({})").status == 400);
  CHECK(C().Do("POST", "/api/v1/rename?path=/agfs/renamed.bin", "not json").status == 400);
  CHECK(C().Do("POST", "/api/v1/rename?path=/agfs/missing", R"({"newPath":"/agfs/m2"})").status ==
        404);
  CHECK(C().Do("POST", "/api/v1/rename?path=/agfs/renamed.bin", R"({"newPath":"/agfs/../etc"})")
            .status == 400);
  CHECK(C().Get("/api/v1/rename?path=/agfs/renamed.bin").status == 405);

  auto ch = C().Do("POST", "/api/v1/chmod?path=/agfs/renamed.bin", R"({"mode":384})");
  CHECK(ch.status == 200);
  CHECK(Json(ch)["message"] == "permissions changed");
  CHECK(Json(C().Get("/api/v1/stat?path=/agfs/renamed.bin"))["mode"] == 0600);
  CHECK(C().Do("POST", "/api/v1/chmod?path=/agfs/missing", R"({"mode":384})").status == 404);

  auto t = C().Do("POST", "/api/v1/touch?path=/agfs/touched");
  CHECK(t.status == 200);
  CHECK(Json(t)["message"] == "touched");
  CHECK(Json(C().Get("/api/v1/stat?path=/agfs/touched"))["size"] == 0);
  std::string before = Json(C().Get("/api/v1/stat?path=/agfs/renamed.bin"))["modTime"];
  CHECK(C().Do("POST", "/api/v1/touch?path=/agfs/renamed.bin").status == 200);
  CHECK(Json(C().Get("/api/v1/stat?path=/agfs/renamed.bin"))["modTime"] != before);
  CHECK(C().Get("/api/v1/files?path=/agfs/renamed.bin").body == "0123456789");

  CHECK(C().Do("DELETE", "/api/v1/directories?path=/agfs").status == 409);
  auto df = C().Do("DELETE", "/api/v1/files?path=/agfs/renamed.bin");
  CHECK(df.status == 200);
  CHECK(Json(df)["message"] == "deleted");
  CHECK(C().Do("DELETE", "/api/v1/files?path=/agfs/renamed.bin").status == 404);
  CHECK(C().Do("DELETE", "/api/v1/directories?path=/agfs&recursive=true").status == 200);
  CHECK(C().Get("/api/v1/stat?path=/agfs").status == 404);
  CHECK(C().Get("/api/v1/nosuch").status == 404);
}

TEST_CASE("bad input is answered 4xx and the server stays up") {
  std::string long_name(256, 'n');
  std::string ok_name(255, 'n');
  CHECK(C().Do("PUT", StrCat("/bad/", ok_name), "x").status == 201);
  for (std::string target :
       {std::string("/a/../etc/passwd"), std::string("/a/%2e%2e/b"), std::string("/a/b%00c"),
        std::string("/a//b"), std::string("/./x"), StrCat("/bad/", long_name),
        std::string("/api/v1/files?path=/a/../b"), std::string("/api/v1/files?path=/a%00b"),
        std::string("/api/v1/files?path=relative"), StrCat("/api/v1/files?path=/bad/", long_name),
        std::string("/api/v1/stat?path=/..")}) {
    INFO(target);
    auto g = C().Get(target);
    CHECK(g.status == 400);
    auto p = C().Do("PUT", target, "data");
    CHECK(p.status == 400);
  }
  CHECK(C().Get("/api/v1/directories?path=/..").status == 400);
  CHECK(C().Do("DELETE", "/api/v1/files?path=/../x&recursive=true").status == 400);
  // Nothing was created by the refused writes.
  CHECK(C().Get("/etc").status == 404);
  CHECK(C().Get("/b").status == 404);

  // Malformed requests on the wire.
  for (std::string raw : {std::string("GARBAGE\r\n\r\n"),
                          std::string("GET /x HTTP/1.1\r\nContent-Length: -5\r\n\r\n"),
                          std::string("PUT /y HTTP/1.1\r\nHost: x\r\nContent-Length: zz\r\n\r\n"),
                          std::string("GET /\x01\x02 HTTP/1.1\r\n\r\n")}) {
    INFO(raw);
    std::string resp = RawExchange(C().port(), raw);
    REQUIRE(resp.size() >= 12);
    CHECK(resp.substr(0, 9) == "HTTP/1.1 ");
    CHECK(resp[9] == '4');
  }
  CHECK(C().FilerRunning());
  CHECK(C().Get("/status").status == 200);
  CHECK(C().Get(StrCat("/bad/", ok_name)).body == "x");
}

TEST_CASE("kelp server answers the quickstart's curl http://127.0.0.1:PORT/hello") {
  TempDir tmp("kelp-server-http");
  int fport = FreePort(), vport = FreePort();
  auto p = Process::Start({KelpBinary(), "server", StrCat("-dir=", tmp.path()),
                           StrCat("-filer.port=", fport), StrCat("-volume.port=", vport),
                           StrCat("-volume.port.grpc=", vport + 10000), "-filer.maxMB=1"},
                          tmp.file("server.log"));
  REQUIRE(p.ok());
  std::string addr = StrCat("127.0.0.1:", fport);
  http::HttpClient client;
  // Ready once a blob can be placed: the embedded volume server has registered.
  REQUIRE(WaitFor(
      [&] {
        auto a = client.Get(addr, "/dir/assign");
        return a.ok() && a->status == 200;
      },
      std::chrono::seconds(20)));
  auto put = client.Do("PUT", addr, "/hello", {}, "hello\n");
  REQUIRE(put.ok());
  CHECK(put->status == 201);
  auto get = client.Get(addr, "/hello");
  REQUIRE(get.ok());
  CHECK(get->status == 200);
  CHECK(get->body == "hello\n");
  // And a file that needs the volume server.
  std::string big = RandomBytes(3 * kMiB / 2, 41);
  REQUIRE(client.Do("PUT", addr, "/big", {}, big)->status == 201);
  CHECK(client.Get(addr, "/big")->body == big);
  CHECK((*p)->Stop() == 0);
}

TEST_CASE("seaweed: multipart uploads, append, mv.from, agfs: truncate, symlink, unsupported") {
  std::string part = RandomBytes(5000, 51);
  std::string body =
      StrCat("--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"up.bin\"\r\n",
             "Content-Type: application/x-thing\r\n\r\n", part, "\r\n--XyZ--\r\n");
  http::Headers mp;
  mp.Set("Content-Type", "multipart/form-data; boundary=XyZ");
  auto up = C().Do("POST", "/mp/", body, mp);
  CHECK(up.status == 201);
  CHECK(Json(up)["name"] == "up.bin");
  auto g = C().Get("/mp/up.bin");
  CHECK(g.body == part);
  CHECK(g.headers.Get("Content-Type") == "application/x-thing");

  REQUIRE(C().Do("PUT", "/mp/log", "one,").status == 201);
  REQUIRE(C().Do("POST", "/mp/log?op=append", "two").status == 201);
  CHECK(C().Get("/mp/log").body == "one,two");

  CHECK(C().Do("POST", "/mp/moved?mv.from=/mp/log").status == 204);
  CHECK(C().Get("/mp/moved").body == "one,two");
  CHECK(C().Get("/mp/log").status == 404);

  REQUIRE(C().Do("POST", "/api/v1/truncate?path=/mp/moved&size=3").status == 200);
  CHECK(C().Get("/mp/moved").body == "one");
  CHECK(C().Do("POST", "/api/v1/truncate?path=/mp/moved").status == 400);
  CHECK(C().Do("POST", "/api/v1/symlink?path=/mp/link", R"({"target":"/mp/moved"})").status == 201);
  auto rl = C().Get("/api/v1/readlink?path=/mp/link");
  CHECK(rl.status == 200);
  CHECK(Json(rl)["target"] == "/mp/moved");
  CHECK(C().Do("POST", "/api/v1/grep", R"({"path":"/mp","pattern":"x"})").status == 501);
}
