// VolumeClient against a real in-process server.
#include "volume/client/volume_client.h"

#include <catch2/catch.hpp>

#include "shared/file_id.h"
#include "shared/hash.h"
#include "shared/status.h"
#include "volume/server/test_server.h"
#include "volume/store/fault_env.h"

using namespace kelp::volume;
using namespace kelp::volume::testing;
using kelp::FileId;

TEST_CASE("upload, ranged read, streaming read, delete") {
  TestServer t;
  REQUIRE(t.server->store().Allocate(1, "", "000").ok());
  VolumeClient c;
  std::string fid = FileId{1, 5, 0x1234}.ToString();
  std::string data = RandomBlob(5, 200000);
  auto up = c.Upload(t.addr(), fid, data, true);
  REQUIRE(up.ok());
  CHECK(up->size == data.size());
  CHECK(up->etag == fmt::format("{:016x}", kelp::Hash64(data)));

  auto all = c.Read(t.addr(), fid);
  REQUIRE(all.ok());
  CHECK(*all == data);
  auto part = c.Read(t.addr(), fid, 1000, 500);
  REQUIRE(part.ok());
  CHECK(*part == data.substr(1000, 500));
  auto tail = c.Read(t.addr(), fid, 199990);
  REQUIRE(tail.ok());
  CHECK(*tail == data.substr(199990));

  std::string streamed;
  int pieces = 0;
  REQUIRE(c.Read(t.addr(), fid, 0, 0, [&](std::string_view p) {
             streamed.append(p);
             ++pieces;
             return absl::OkStatus();
           }).ok());
  CHECK(streamed == data);
  CHECK(pieces >= 1);
  // A sink error aborts the read and comes back as is.
  absl::Status stop =
      c.Read(t.addr(), fid, 0, 0, [](std::string_view) { return absl::CancelledError("enough"); });
  CHECK(stop.code() == absl::StatusCode::kCancelled);

  CHECK(kelp::ErrnoOf(c.Read(t.addr(), fid, 300000, 0).status()) == EINVAL);  // 416: OutOfRange
  auto d = c.Delete(t.addr(), fid);
  REQUIRE(d.ok());
  CHECK(*d == data.size());
  CHECK(kelp::ErrnoOf(c.Read(t.addr(), fid).status()) == ENOENT);
  CHECK(kelp::ErrnoOf(c.Delete(t.addr(), fid).status()) == ENOENT);
}

TEST_CASE("errors carry errnos") {
  kelp::volume::FaultEnv env;
  TestServer t(nullptr, [&](VolumeServer::Options& o) {
    o.env = &env;
    o.file_size_limit_mb = 1;
  });
  REQUIRE(t.server->store().Allocate(1, "", "000").ok());
  VolumeClient c;
  CHECK(kelp::ErrnoOf(c.Upload(t.addr(), "1,", "x").status()) == EINVAL);
  CHECK(kelp::ErrnoOf(
            c.Upload(t.addr(), FileId{1, 1, 1}.ToString(), std::string(2 << 20, 'x')).status()) ==
        EFBIG);
  env.SetWriteBudget(0);
  CHECK(kelp::ErrnoOf(c.Upload(t.addr(), FileId{1, 2, 1}.ToString(), "x").status()) == ENOSPC);
  env.SetWriteBudget(-1);
  t.server->store().Get(1)->SetReadOnly(true);
  CHECK(kelp::ErrnoOf(c.Upload(t.addr(), FileId{1, 3, 1}.ToString(), "x").status()) == EROFS);
  std::string dead = t.addr();
  t.server->Stop();
  auto r = c.Read(dead, FileId{1, 1, 1}.ToString());
  CHECK(r.status().code() == absl::StatusCode::kUnavailable);
  CHECK(kelp::ErrnoOf(r.status()) == EIO);
}

TEST_CASE("batch delete over gRPC") {
  TestServer t;
  REQUIRE(t.server->store().Allocate(2, "", "000").ok());
  VolumeClient c;
  std::vector<std::string> fids;
  for (uint64_t k = 1; k <= 5; ++k) {
    fids.push_back(FileId{2, k, 9}.ToString());
    REQUIRE(c.Upload(t.addr(), fids.back(), "blob").ok());
  }
  fids.push_back(FileId{2, 77, 9}.ToString());
  auto r = c.BatchDelete(t.server->grpc_address(), fids);
  REQUIRE(r.ok());
  REQUIRE(r->size() == 6);
  for (int i = 0; i < 5; ++i) {
    CHECK((*r)[i].status == 200);
    CHECK((*r)[i].size == 4);
  }
  CHECK((*r)[5].status == 404);
  CHECK(kelp::ErrnoOf(c.Read(t.addr(), fids[0]).status()) == ENOENT);
  std::string grpc_addr = t.server->grpc_address();
  t.server->Stop();
  CHECK(c.BatchDelete(grpc_addr, fids).status().code() == absl::StatusCode::kUnavailable);
}

TEST_CASE("stat blobs over gRPC: which fids a server holds") {
  TestServer t;
  REQUIRE(t.server->store().Allocate(3, "", "000").ok());
  VolumeClient c;
  std::string held = FileId{3, 1, 0xabc}.ToString();
  std::string deleted = FileId{3, 2, 0xabc}.ToString();
  REQUIRE(c.Upload(t.addr(), held, RandomBlob(1, 3000)).ok());
  REQUIRE(c.Upload(t.addr(), deleted, "x").ok());
  REQUIRE(c.Delete(t.addr(), deleted).ok());
  std::vector<std::string> fids = {held,
                                   deleted,
                                   FileId{3, 1, 0xabd}.ToString(),  // another cookie
                                   FileId{3, 9, 0xabc}.ToString(),  // never written
                                   FileId{4, 1, 0xabc}.ToString(),  // volume not here
                                   "3,zz"};
  auto r = c.StatBlobs(t.server->grpc_address(), fids);
  REQUIRE(r.ok());
  REQUIRE(r->size() == fids.size());
  CHECK((*r)[0].fid() == held);
  CHECK((*r)[0].status() == 200);
  CHECK((*r)[0].size() == 3000);
  for (int i = 1; i <= 4; ++i) {
    INFO(fids[i]);
    CHECK((*r)[i].status() == 404);
  }
  CHECK((*r)[5].status() == 400);
  auto listed = c.ListBlobs(t.server->grpc_address(), 3);
  REQUIRE(listed.ok());
  REQUIRE(listed->size() == 1);
  CHECK((*listed)[0].fid() == held);
  CHECK((*listed)[0].size() == 3000);
  CHECK(kelp::ErrnoOf(c.ListBlobs(t.server->grpc_address(), 4).status()) == ENOENT);
  std::string grpc_addr = t.server->grpc_address();
  t.server->Stop();
  CHECK(c.StatBlobs(grpc_addr, fids).status().code() == absl::StatusCode::kUnavailable);
}

TEST_CASE("control plane through the client: allocate, status, read-only, vacuum, delete") {
  TestServer t(nullptr, [](VolumeServer::Options& o) { o.max_volumes = 2; });
  VolumeClient c;
  const std::string g = t.server->grpc_address();
  REQUIRE(c.AllocateVolume(g, 3, "pics", "000").ok());
  REQUIRE(c.AllocateVolume(g, 3, "pics", "000").ok());
  CHECK(kelp::ErrnoOf(c.AllocateVolume(g, 3, "docs", "000")) == EEXIST);
  REQUIRE(c.AllocateVolume(g, 4, "", "000").ok());
  CHECK(kelp::ErrnoOf(c.AllocateVolume(g, 5, "", "000")) == ENOSPC);  // -max=2
  for (uint64_t k = 1; k <= 10; ++k) {
    REQUIRE(c.Upload(t.addr(), FileId{3, k, 1}.ToString(), std::string(1000, 'v')).ok());
  }
  for (uint64_t k = 1; k <= 8; ++k) REQUIRE(c.Delete(t.addr(), FileId{3, k, 1}.ToString()).ok());
  auto st = c.GetStatus(g);
  REQUIRE(st.ok());
  REQUIRE(st->volumes_size() == 2);
  CHECK(st->volumes(0).id() == 3);
  CHECK(st->volumes(0).file_count() == 2);
  CHECK(st->max_volumes() == 2);

  auto vac = c.Vacuum(g, 0);
  REQUIRE(vac.ok());
  REQUIRE(vac->compacted_size() == 1);
  CHECK(vac->compacted(0) == 3);
  CHECK(*c.Read(t.addr(), FileId{3, 9, 1}.ToString()) == std::string(1000, 'v'));

  REQUIRE(c.SetReadOnly(g, 3, true).ok());
  CHECK(kelp::ErrnoOf(c.Upload(t.addr(), FileId{3, 20, 1}.ToString(), "x").status()) == EROFS);
  CHECK(kelp::ErrnoOf(c.SetReadOnly(g, 99, true)) == ENOENT);
  REQUIRE(c.DeleteVolume(g, 3).ok());
  CHECK(kelp::ErrnoOf(c.DeleteVolume(g, 3)) == ENOENT);
  CHECK(kelp::ErrnoOf(c.Read(t.addr(), FileId{3, 9, 1}.ToString()).status()) == ENOENT);
}

TEST_CASE("StatusFromHttp: each volume server status becomes the errno a caller acts on") {
  struct Case {
    int http;
    int err;
  };
  const Case cases[] = {{404, ENOENT}, {401, EACCES}, {507, ENOSPC}, {413, EFBIG}, {403, EROFS},
                        {409, EEXIST}, {400, EINVAL}, {500, EIO},    {502, EIO},   {418, EIO}};
  for (const Case& c : cases) {
    CAPTURE(c.http);
    absl::Status s = StatusFromHttp(c.http, "", "read 3,01");
    CHECK_FALSE(s.ok());
    CHECK(kelp::ErrnoOf(s) == c.err);
    CHECK(kelp::CarriedErrno(s) == c.err);
  }
  // 416 and 503 keep their meaning as codes: out of range, and "try elsewhere / later".
  absl::Status range = StatusFromHttp(416, "", "read");
  CHECK(range.code() == absl::StatusCode::kOutOfRange);
  CHECK(kelp::ErrnoOf(range) == EINVAL);
  absl::Status busy = StatusFromHttp(503, "", "write");
  CHECK(busy.code() == absl::StatusCode::kUnavailable);
  CHECK(kelp::ErrnoOf(busy) == EIO);
}

TEST_CASE("StatusFromHttp: the message names the operation, the status and the server's error") {
  absl::Status s = StatusFromHttp(404, R"({"error":"needle 3,01 not found"})", "read 3,01");
  std::string msg(s.message());
  CHECK(msg.find("read 3,01") != std::string::npos);
  CHECK(msg.find("HTTP 404") != std::string::npos);
  CHECK(msg.find("needle 3,01 not found") != std::string::npos);
  CHECK(msg.find("{\"error\"") == std::string::npos);  // the JSON wrapper is taken off
  // An escaped quote inside the error text does not end it.
  std::string esc(StatusFromHttp(400, R"({"error":"bad \"fid\" x"})", "w").message());
  CHECK(esc.find(R"(bad \"fid\" x)") != std::string::npos);
  // A body that is not JSON is quoted as is, cut to 200 bytes.
  std::string plain(StatusFromHttp(500, std::string(1000, 'z'), "w").message());
  CHECK(plain.find(std::string(200, 'z')) != std::string::npos);
  CHECK(plain.find(std::string(201, 'z')) == std::string::npos);
}
