// BlobClient against real in-process volume servers, with a coordinator of the test's own.
#include "volume/client/blob_client.h"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <memory>

#include "shared/file_id.h"
#include "shared/metrics.h"
#include "shared/status.h"
#include "shared/strings.h"
#include "volume/server/test_server.h"

using namespace kelp::volume;
using namespace kelp::volume::testing;
using kelp::FileId;
using kelp::StrCat;

namespace {

// A sink into buf that copies only the pieces that did not land where they belong already,
// and counts them.
struct InPlace {
  std::string& buf;
  size_t placed = 0, elsewhere = 0;
  ByteSink Sink() {
    return ByteSink(
        [this](std::string_view p) {
          if (p.data() != buf.data() + placed) {
            ++elsewhere;
            std::memcpy(buf.data() + placed, p.data(), p.size());
          }
          placed += p.size();
          return absl::OkStatus();
        },
        buf.data(), buf.size());
  }
};

// Assigns keys of volume 1 on `primary`; looks volume 1 up as `holders`.
struct TestCoordinator {
  std::string primary;
  std::vector<std::string> holders;
  std::atomic<uint64_t> next_key{1};
  std::atomic<int> assigns{0}, lookups{0};
  absl::Status assign_error;

  Coordinator Get() {
    Coordinator c;
    c.assign = [this](const kelp::cluster::AssignRequest& r) -> absl::StatusOr<kelp::cluster::AssignResponse> {
      ++assigns;
      if (!assign_error.ok()) return assign_error;
      kelp::cluster::AssignResponse a;
      uint64_t key = next_key.fetch_add(r.count());
      a.set_fid(FileId{1, key, 0xabcdef}.ToString());
      a.set_count(r.count());
      a.add_locations()->set_url(primary);
      return a;
    };
    c.lookup = [this](const kelp::cluster::LookupVolumeRequest& r) -> absl::StatusOr<kelp::cluster::LookupVolumeResponse> {
      ++lookups;
      kelp::cluster::LookupVolumeResponse out;
      for (uint32_t vid : r.volume_ids()) {
        auto* v = out.add_volumes();
        v->set_volume_id(vid);
        if (vid == 1) {
          for (const auto& h : holders) v->add_locations()->set_url(h);
        }
      }
      return out;
    };
    return c;
  }
};

}  // namespace

TEST_CASE("blob client: puts in assigned batches, reads back by ranges, syncs volumes") {
  TestServer t;
  REQUIRE(t.server->store().Allocate(1, "", "000").ok());
  TestCoordinator tc;
  tc.primary = t.addr();
  tc.holders = {t.addr()};
  VolumeClient vc;
  BlobClient::Options o;
  o.assign_batch = 4;
  o.metric_prefix = "kelp_blob_test";
  BlobClient bc(tc.Get(), &vc, o);
  std::vector<std::pair<std::string, std::string>> stored;
  for (int i = 0; i < 10; ++i) {
    std::string data = RandomBlob(i, 1000 + i * 3000);
    auto fid = bc.Put(data, i % 3 == 0);
    REQUIRE(fid.ok());
    stored.emplace_back(*fid, data);
  }
  CHECK(tc.assigns == 3);  // 4 + 4 + 2 of 3 batches
  for (const auto& [fid, data] : stored) {
    std::string out(data.size() - 100, '\0');
    REQUIRE(bc.Read(fid, 50, out.size(), out.data()).ok());
    CHECK(out == data.substr(50, out.size()));
  }
  CHECK(tc.lookups == 0);  // the assignment told where volume 1 is

  // A read into a buffer is received in place: every piece lies where it belongs.
  const auto& [big_fid, big] = stored.back();
  std::string in(big.size() - 7, 'x');
  InPlace sink{in};
  REQUIRE(bc.Get(big_fid, 7, in.size(), sink.Sink()).ok());
  CHECK(sink.placed == in.size());
  CHECK(sink.elsewhere == 0);
  CHECK(in == big.substr(7));

  REQUIRE(bc.SyncVolumes({1}).ok());
  CHECK(kelp::ErrnoOf(bc.SyncVolumes({7})) == EIO);  // nowhere to be found
  std::string nope(10, 'x');
  CHECK(kelp::ErrnoOf(bc.Read(FileId{1, 999999, 0xabcdef}.ToString(), 0, 10, nope.data())) == ENOENT);
  CHECK(nope == std::string(10, 'x'));  // the 404's text went elsewhere
}

TEST_CASE("blob client: a dead replica is skipped, a failed upload takes a fresh assignment") {
  TestServer a, b;
  REQUIRE(a.server->store().Allocate(1, "", "000").ok());
  REQUIRE(b.server->store().Allocate(1, "", "000").ok());
  VolumeClient vc;
  std::string dead = "127.0.0.1:1";
  // Reads: the first holder is dead, the second answers.
  std::string data = RandomBlob(7, 50000);
  std::string fid = FileId{1, 77, 0xabcdef}.ToString();
  REQUIRE(vc.Upload(b.addr(), fid, data).ok());
  TestCoordinator tc;
  tc.primary = dead;
  tc.holders = {dead, b.addr()};
  BlobClient::Options o;
  o.metric_prefix = "kelp_blob_test2";
  BlobClient bc(tc.Get(), &vc, o);
  std::string out(data.size(), '\0');
  REQUIRE(bc.Read(fid, 0, out.size(), out.data()).ok());
  CHECK(out == data);
  // Uploads: the assigned server is dead; the retry goes to a fresh assignment.
  int attempt = 0;
  Coordinator c = tc.Get();
  auto assign = c.assign;
  c.assign = [&](const kelp::cluster::AssignRequest& r) -> absl::StatusOr<kelp::cluster::AssignResponse> {
    auto resp = assign(r);
    if (resp.ok() && attempt++ > 0) resp->mutable_locations(0)->set_url(a.addr());
    return resp;
  };
  BlobClient retrying(c, &vc, o);
  auto put = retrying.Put("payload", false);
  REQUIRE(put.ok());
  CHECK(*vc.Read(a.addr(), *put) == "payload");
  // No writable volume at all: ENOSPC, not a retry storm.
  tc.assign_error = absl::ResourceExhaustedError("no writable volume");
  BlobClient full(tc.Get(), &vc, o);
  CHECK(kelp::ErrnoOf(full.Put("x", false).status()) == ENOSPC);
}

TEST_CASE("blob client: a retry does not go back to the server that failed it while the coordinator still assigns it") {
  TestServer live;
  REQUIRE(live.server->store().Allocate(1, "", "000").ok());
  VolumeClient vc;
  TestCoordinator tc;
  tc.primary = "127.0.0.1:1";  // a server that refuses connections
  Coordinator c = tc.Get();
  auto assign = c.assign;
  int calls = 0;
  // The coordinator has not noticed yet: its first two answers name the dead server.
  c.assign = [&](const kelp::cluster::AssignRequest& r) -> absl::StatusOr<kelp::cluster::AssignResponse> {
    auto resp = assign(r);
    if (resp.ok() && ++calls > 2) resp->mutable_locations(0)->set_url(live.addr());
    return resp;
  };
  BlobClient::Options o;
  o.metric_prefix = "kelp_blob_test3";
  o.put_attempts = 2;
  BlobClient bc(c, &vc, o);
  auto put = bc.Put("payload", false);
  REQUIRE(put.ok());
  CHECK(*vc.Read(live.addr(), *put) == "payload");
  CHECK(calls == 3);  // one upload to the dead server, not two
}

TEST_CASE("a replica that fails part way is resumed on the next one, no byte twice") {
  std::string blob = RandomBlob(8, 10000);
  std::vector<std::string> asked;
  auto read = [&](const std::string& url, uint64_t off, uint64_t len,
                  const ByteSink& sink) -> absl::Status {
    asked.push_back(StrCat(url, "@", off, "+", len));
    if (url == "dead") return absl::UnavailableError("connection refused");
    if (url == "flaky") {  // sends 1234 bytes, then drops
      RETURN_IF_ERROR(sink(std::string_view(blob).substr(off, 1234)));
      return absl::UnavailableError("connection reset");
    }
    if (url == "short") return sink(std::string_view(blob).substr(off, 10));  // "ok" but short
    return sink(std::string_view(blob).substr(off, len));
  };
  std::string got;
  auto sink = [&](std::string_view p) {
    got.append(p);
    return absl::OkStatus();
  };
  int failovers = 0;
  REQUIRE(
      ReadWithFailover({"dead", "flaky", "short", "good"}, 100, 5000, read, sink, &failovers).ok());
  CHECK(got == blob.substr(100, 5000));
  CHECK(failovers == 3);
  CHECK(asked == std::vector<std::string>{"dead@100+5000", "flaky@100+5000", "short@1334+3766",
                                          "good@1344+3756"});

  got.clear();
  failovers = 0;
  CHECK(ReadWithFailover({"dead", "flaky"}, 0, 5000, read, sink, &failovers).code() ==
        absl::StatusCode::kUnavailable);
  CHECK(failovers == 2);
  CHECK(ReadWithFailover({}, 0, 1, read, sink, &failovers).code() != absl::StatusCode::kOk);

  // Into a buffer: each replica's bytes go on where the last one stopped.
  std::string in(5000, 'x');
  InPlace in_place{in};
  auto read_in_place = [&](const std::string& url, uint64_t off, uint64_t len,
                           const ByteSink& sink) -> absl::Status {
    REQUIRE(sink.into != nullptr);
    REQUIRE(sink.into_size == len);
    size_t n = url == "flaky" ? 1234 : len;
    std::memcpy(sink.into, blob.data() + off, n);
    RETURN_IF_ERROR(sink(std::string_view(sink.into, n)));
    return n < len ? absl::UnavailableError("connection reset") : absl::OkStatus();
  };
  failovers = 0;
  REQUIRE(ReadWithFailover({"flaky", "good"}, 100, 5000, read_in_place, in_place.Sink(), &failovers)
              .ok());
  CHECK(failovers == 1);
  CHECK(in_place.placed == 5000);
  CHECK(in_place.elsewhere == 0);
  CHECK(in == blob.substr(100, 5000));

  // A sink error (the client went away) stops at once.
  auto bad_sink = [](std::string_view) { return absl::DataLossError("client gone"); };
  asked.clear();
  CHECK(ReadWithFailover({"good", "good"}, 0, 10, read, bad_sink, &failovers).code() ==
        absl::StatusCode::kDataLoss);
  CHECK(asked.size() == 1);
}

namespace {

// A BlobClient with local reads on one in-process volume server (real files, on 127.0.0.1).
struct LocalSetup {
  TestServer t;
  TestCoordinator tc;
  VolumeClient vc;
  std::unique_ptr<BlobClient> bc;
  kelp::Counter* local_reads;
  kelp::Counter* fallbacks;

  explicit LocalSetup(const std::string& prefix, bool local_reads_on = true) {
    REQUIRE(t.server->store().Allocate(1, "", "000").ok());
    tc.primary = t.addr();
    tc.holders = {t.addr()};
    Connect(prefix, local_reads_on);
  }
  // A fresh client (nothing cached of where volumes are, nor of which servers read locally),
  // its metrics named by prefix.
  void Connect(const std::string& prefix, bool local_reads_on = true) {
    BlobClient::Options o;
    o.metric_prefix = prefix;
    o.local_reads = local_reads_on;
    bc = std::make_unique<BlobClient>(tc.Get(), &vc, o);
    auto& reg = kelp::MetricsRegistry::Default();
    local_reads = reg.GetCounter(prefix + "_local_reads_total", "");
    fallbacks = reg.GetCounter(prefix + "_local_read_fallbacks_total", "");
  }
  std::string Put(const std::string& data) {
    auto fid = bc->Put(data, false);
    REQUIRE(fid.ok());
    return *fid;
  }
};

}  // namespace

TEST_CASE(
    "blob client: a whole blob on this machine is read from the volume's file, a part over HTTP") {
  LocalSetup s("kelp_blob_local_test");
  std::string data = RandomBlob(41, 3 << 20);
  std::string fid = s.Put(data);
  CHECK(s.bc->ReadsLocally(fid));

  std::string in(data.size(), 'x');
  InPlace sink{in};
  REQUIRE(s.bc->Get(fid, 0, in.size(), sink.Sink()).ok());
  CHECK(in == data);
  CHECK(sink.elsewhere == 0);  // straight into the reader's buffer
  CHECK(s.local_reads->value() == 1);

  std::string part(1000, 'x');
  REQUIRE(s.bc->Read(fid, 0, part.size(), part.data()).ok());
  CHECK(part == data.substr(0, part.size()));
  REQUIRE(s.bc->Read(fid, 5000, part.size(), part.data()).ok());
  CHECK(part == data.substr(5000, part.size()));
  CHECK(s.local_reads->value() == 1);
  CHECK(s.fallbacks->value() == 0);

  std::string nope(10, 'x');
  CHECK(kelp::ErrnoOf(s.bc->Read(FileId{1, 999999, 0xabcdef}.ToString(), 0, 10, nope.data())) ==
        ENOENT);
  FileId wrong_cookie = *FileId::Parse(fid);
  wrong_cookie.cookie ^= 1;
  CHECK(kelp::ErrnoOf(s.bc->Read(wrong_cookie.ToString(), 0, 10, nope.data())) == ENOENT);
  CHECK(nope == std::string(10, 'x'));
}

TEST_CASE("blob client: without local reads every read goes over HTTP") {
  LocalSetup s("kelp_blob_nolocal_test", false);
  std::string data = RandomBlob(43, 100000);
  std::string fid = s.Put(data);
  CHECK_FALSE(s.bc->ReadsLocally(fid));
  std::string in(data.size(), 'x');
  REQUIRE(s.bc->Read(fid, 0, in.size(), in.data()).ok());
  CHECK(in == data);
  CHECK(s.local_reads->value() == 0);
}

TEST_CASE(
    "blob client: a blob whose bytes in the volume's file are damaged is an error, never its "
    "bytes") {
  // Small blobs are read through the page cache, large ones with O_DIRECT.
  const size_t size = GENERATE(size_t{200000}, size_t{(2 << 20) + 12345});
  CAPTURE(size);
  LocalSetup s(StrCat("kelp_blob_local_damaged_test_", size));
  std::string data = RandomBlob(47, size);
  std::string fid = s.Put(data);
  auto loc = s.vc.Locate(s.t.addr(), fid);
  REQUIRE(loc.ok());
  int fd = ::open(loc->dat_path.c_str(), O_WRONLY);
  REQUIRE(fd >= 0);
  char flipped = static_cast<char>(data[1234] ^ 0x40);
  REQUIRE(::pwrite(fd, &flipped, 1, loc->offset + 16 + 1234) == 1);
  ::close(fd);
  std::string in(data.size(), 'x');
  absl::Status r = s.bc->Read(fid, 0, in.size(), in.data());
  CHECK(kelp::ErrnoOf(r) == EIO);  // the file's check failed, and so did the server's
  CHECK(s.fallbacks->value() == 1);
  CHECK(s.local_reads->value() == 0);
}

TEST_CASE(
    "blob client: after a vacuum renamed a new file over the volume's, local reads open it again") {
  LocalSetup s("kelp_blob_local_vacuum_test");
  std::string gone = RandomBlob(53, 500000);
  std::string kept = RandomBlob(59, 300000);
  std::string gone_fid = s.Put(gone);
  std::string kept_fid = s.Put(kept);
  std::string in(kept.size(), 'x');
  REQUIRE(s.bc->Read(kept_fid, 0, in.size(), in.data()).ok());  // opens the .dat
  CHECK(s.local_reads->value() == 1);
  REQUIRE(s.vc.Delete(s.t.addr(), gone_fid).ok());
  std::shared_ptr<Volume> v = s.t.server->store().Get(1);
  REQUIRE(v);
  auto compacted = v->Compact();
  REQUIRE(compacted.ok());
  // The needle moved to the front of the new file; the open one still has the old bytes there.
  auto loc = s.vc.Locate(s.t.addr(), kept_fid);
  REQUIRE(loc.ok());
  CHECK(loc->offset < gone.size());
  in.assign(kept.size(), 'x');
  REQUIRE(s.bc->Read(kept_fid, 0, in.size(), in.data()).ok());
  CHECK(in == kept);
  CHECK(s.local_reads->value() == 2);
  CHECK(s.fallbacks->value() == 0);
}

TEST_CASE(
    "blob client: a local server that does not answer is left for the next replica, then skipped") {
  LocalSetup s("kelp_blob_local_dead_test");
  std::string data = RandomBlob(61, 400000);
  std::string fid = s.Put(data);
  // Another replica on this machine first, one nobody listens on; a client that looks it up.
  s.tc.holders = {"127.0.0.1:1", s.t.addr()};
  s.Connect("kelp_blob_local_dead_test2");
  std::string in(data.size(), 'x');
  REQUIRE(s.bc->Read(fid, 0, in.size(), in.data()).ok());  // over HTTP from the live one
  CHECK(in == data);
  CHECK(s.fallbacks->value() == 1);
  CHECK(s.local_reads->value() == 0);
  in.assign(data.size(), 'x');
  REQUIRE(s.bc->Read(fid, 0, in.size(), in.data()).ok());  // the dead one is not tried again
  CHECK(in == data);
  CHECK(s.local_reads->value() == 1);
  CHECK(s.fallbacks->value() == 1);
  CHECK(s.bc->ReadsLocally(fid));
}
