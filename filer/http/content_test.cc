// The write splitter and the read path's range math, against an in-memory volume::BlobStore.
#include "filer/http/content.h"

#include <map>

#include <catch2/catch.hpp>

#include "filer/client/chunk_intervals.h"
#include "shared/file_id.h"
#include "shared/status.h"
#include "shared/strings.h"

using namespace kelp;
using namespace kelp::filer;

namespace {

class MemoryBlobIo : public volume::BlobStore {
 public:
  absl::StatusOr<std::string> Put(std::string_view data, bool) override {
    if (fail_puts_after >= 0 && puts >= fail_puts_after)
      return PosixError(EIO, "injected upload failure");
    ++puts;
    std::string fid = FileId{1, ++next_, 0x1234abcd}.ToString();
    blobs[fid] = std::string(data);
    return fid;
  }
  absl::Status Get(std::string_view fid, uint64_t offset, uint64_t length,
                   const volume::ByteSink& sink) override {
    auto it = blobs.find(std::string(fid));
    if (it == blobs.end()) return PosixError(ENOENT, "no blob");
    REQUIRE(offset + length <= it->second.size());
    ++gets;
    // In pieces, as a socket delivers them.
    for (uint64_t done = 0; done < length;) {
      uint64_t n = std::min<uint64_t>(1000, length - done);
      RETURN_IF_ERROR(sink(std::string_view(it->second).substr(offset + done, n)));
      done += n;
    }
    return absl::OkStatus();
  }
  absl::Status SyncVolumes(const std::vector<uint32_t>&) override { return absl::OkStatus(); }
  void Discard(const std::vector<std::string>& fids) override {
    for (const auto& f : fids) {
      blobs.erase(f);
      discarded.push_back(f);
    }
  }

  std::map<std::string, std::string> blobs;
  std::vector<std::string> discarded;
  int puts = 0, gets = 0;
  int fail_puts_after = -1;

 private:
  uint64_t next_ = 0;
};

std::string Pattern(size_t n, int seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + seed * 7 + i / 4093) & 0xff);
  return s;
}

// A GetChunksResponse for a file of the given size from chunks (seqs in order) and inline.
GetChunksResponse File(uint64_t size, const std::vector<Chunk>& chunks,
                       std::string inline_data = "") {
  GetChunksResponse g;
  g.mutable_attr()->set_size(size);
  uint64_t seq = 1;
  for (Chunk c : chunks) {
    c.set_seq(seq++);
    *g.add_chunks() = c;
  }
  g.set_inline_data(std::move(inline_data));
  return g;
}

std::string ReadRange(const GetChunksResponse& g, uint64_t offset, uint64_t length, volume::BlobStore& io) {
  std::string out;
  absl::Status s = StreamContent(g, offset, length, io, [&](std::string_view p) {
    out.append(p);
    return absl::OkStatus();
  });
  REQUIRE(s.ok());
  return out;
}

}  // namespace

TEST_CASE("the write splitter cuts a body into blobs of at most blob_size") {
  MemoryBlobIo io;
  const size_t kBlob = 1 << 20;
  std::string data = Pattern(5 * kBlob + 12345, 1);
  for (int64_t hint : {int64_t(-1), int64_t(data.size())}) {
    io.blobs.clear();
    StringBody body(data.substr(100));
    auto up = UploadBlobs(std::string_view(data).substr(0, 100), body, 7, kBlob, hint, io);
    REQUIRE(up.ok());
    CHECK(up->bytes == data.size());
    REQUIRE(up->chunks.size() == 6);
    uint64_t off = 7;
    std::string joined;
    for (const auto& c : up->chunks) {
      CHECK(c.offset() == off);
      CHECK(c.blob_offset() == 0);
      CHECK(c.size() == c.blob_size());
      CHECK(c.size() <= kBlob);
      off += c.size();
      joined += io.blobs.at(c.fid());
    }
    CHECK(up->chunks.back().size() == 12345);
    CHECK(joined == data);
  }
}

TEST_CASE("the write splitter: exact multiples, tiny blobs, empty bodies, wrong hints") {
  MemoryBlobIo io;
  {
    StringBody body(Pattern(3000, 2));
    auto up = UploadBlobs("", body, 0, 1000, 3000, io);
    REQUIRE(up.ok());
    CHECK(up->chunks.size() == 3);
  }
  {
    StringBody body("");
    auto up = UploadBlobs("", body, 0, 1000, -1, io);
    REQUIRE(up.ok());
    CHECK(up->chunks.empty());
    CHECK(up->bytes == 0);
  }
  {
    // A head longer than a blob is cut too.
    StringBody body("tail");
    auto up = UploadBlobs(Pattern(2500, 3), body, 0, 1000, -1, io);
    REQUIRE(up.ok());
    CHECK(up->chunks.size() == 3);
    CHECK(up->bytes == 2504);
  }
  {
    // A body longer than announced is refused, not cut short silently.
    StringBody body(Pattern(500, 4));
    CHECK(ErrnoOf(UploadBlobs("", body, 0, 1000, 100, io).status()) == EINVAL);
  }
}

TEST_CASE("a failed upload discards the blobs already stored") {
  MemoryBlobIo io;
  io.fail_puts_after = 2;
  StringBody body(Pattern(5000, 5));
  auto up = UploadBlobs("", body, 0, 1000, -1, io);
  CHECK(ErrnoOf(up.status()) == EIO);
  CHECK(io.discarded.size() == 2);
  CHECK(io.blobs.empty());
}

TEST_CASE("reads stream visible intervals: overlaps, holes, inline bottom layer, ranges") {
  MemoryBlobIo io;
  std::string a = Pattern(3000, 6), b = Pattern(1000, 7);
  auto fa = io.Put(a, false).value(), fb = io.Put(b, false).value();
  Chunk ca, cb;
  ca.set_fid(fa);
  ca.set_offset(0);
  ca.set_size(3000);
  ca.set_blob_size(3000);
  // b's middle 500 bytes land at 1000..1500, newer than a.
  cb.set_fid(fb);
  cb.set_offset(1000);
  cb.set_size(500);
  cb.set_blob_offset(250);
  cb.set_blob_size(1000);
  // 5000 bytes: a, b over it, then a hole up to 5000.
  GetChunksResponse g = File(5000, {ca, cb});
  std::string want = a;
  want.replace(1000, 500, b.substr(250, 500));
  want += std::string(2000, '\0');
  CHECK(ReadRange(g, 0, 5000, io) == want);
  // Every range reads as the same slice of the whole, including ones past the end.
  for (auto [off, len] : std::vector<std::pair<uint64_t, uint64_t>>{{0, 1},
                                                                    {999, 2},
                                                                    {1000, 500},
                                                                    {1499, 2},
                                                                    {2999, 2},
                                                                    {4990, 100},
                                                                    {1234, 3333},
                                                                    {6000, 5}}) {
    std::string expect = off >= want.size() ? "" : want.substr(off, len);
    CHECK(ReadRange(g, off, len, io) == expect);
  }

  // Inline data is the bottom layer: chunks on top of it win, past it is a hole.
  GetChunksResponse gi = File(300, {cb}, std::string(100, 'i'));
  gi.mutable_chunks(0)->set_offset(50);
  gi.mutable_chunks(0)->set_size(20);
  std::string wi =
      std::string(50, 'i') + b.substr(250, 20) + std::string(30, 'i') + std::string(200, '\0');
  CHECK(ReadRange(gi, 0, 300, io) == wi);
  CHECK(ReadRange(gi, 60, 50, io) == wi.substr(60, 50));
}

TEST_CASE("etags follow the content") {
  Chunk c;
  c.set_fid(FileId{1, 1, 2}.ToString());
  c.set_size(10);
  GetChunksResponse g1 = File(10, {c});
  GetChunksResponse g2 = File(10, {c});
  CHECK(ContentEtag(g1) == ContentEtag(g2));
  CHECK(ContentEtag(g1).front() == '"');
  g2.mutable_chunks(0)->set_seq(9);
  CHECK(ContentEtag(g1) != ContentEtag(g2));
  CHECK(ContentEtag(File(3, {}, "abc")) != ContentEtag(File(3, {}, "abd")));
  CHECK(ContentEtag(File(3, {}, "abc")) != ContentEtag(File(4, {}, "abc")));
}
