#include "volume/store/volume.h"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>

#include "shared/hash.h"
#include "shared/status.h"
#include "volume/store/test_util.h"

using namespace kelp::volume;
using kelp::volume::testing::RandomBlob;
using kelp::volume::testing::TempDir;

namespace {

Volume::Options Opts(const TempDir& dir, uint32_t id = 1, std::string collection = "") {
  Volume::Options o;
  o.dir = dir.path();
  o.id = id;
  o.collection = std::move(collection);
  return o;
}

std::string ReadBack(const Volume& v, uint64_t key, uint32_t cookie) {
  std::string buf;
  auto n = v.Read(key, cookie, &buf);
  REQUIRE(n.ok());
  return std::string(n->data);
}

void Append(const std::string& path, std::string_view bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::app);
  f.write(bytes.data(), bytes.size());
}

void Truncate(const std::string& path, uint64_t size) { std::filesystem::resize_file(path, size); }

void Poke(const std::string& path, uint64_t offset, char xor_mask) {
  int fd = open(path.c_str(), O_RDWR);
  REQUIRE(fd >= 0);
  char c;
  REQUIRE(pread(fd, &c, 1, offset) == 1);
  c ^= xor_mask;
  REQUIRE(pwrite(fd, &c, 1, offset) == 1);
  close(fd);
}

// Writes keys 1..n with blobs RandomBlob(key, 100 + key).
void Fill(Volume& v, uint64_t n) {
  for (uint64_t k = 1; k <= n; ++k) REQUIRE(v.Write(k, 0xc0 + k, RandomBlob(k, 100 + k)).ok());
}
void CheckFilled(const Volume& v, uint64_t n) {
  for (uint64_t k = 1; k <= n; ++k) REQUIRE(ReadBack(v, k, 0xc0 + k) == RandomBlob(k, 100 + k));
}

}  // namespace

TEST_CASE("write, read, overwrite, delete") {
  TempDir dir;
  auto v = Volume::Create(Opts(dir));
  REQUIRE(v.ok());
  auto w = (*v)->Write(1, 0xabc, "first");
  REQUIRE(w.ok());
  CHECK(w->size == 5);
  CHECK(w->checksum == kelp::Hash64("first"));
  CHECK(ReadBack(**v, 1, 0xabc) == "first");

  REQUIRE((*v)->Write(1, 0xabc, "second, longer").ok());
  CHECK(ReadBack(**v, 1, 0xabc) == "second, longer");

  std::string buf;
  CHECK(kelp::ErrnoOf((*v)->Read(1, 0xabd, &buf).status()) == ENOENT);  // wrong cookie
  CHECK(kelp::ErrnoOf((*v)->Read(2, 0xabc, &buf).status()) == ENOENT);  // absent
  CHECK(kelp::ErrnoOf((*v)->Write(1, 0x999, "hijack").status()) == EEXIST);

  CHECK(kelp::ErrnoOf((*v)->Delete(1, 0x999).status()) == ENOENT);  // wrong cookie keeps it
  auto d = (*v)->Delete(1, 0xabc);
  REQUIRE(d.ok());
  CHECK(*d == 14);
  CHECK(kelp::ErrnoOf((*v)->Read(1, 0xabc, &buf).status()) == ENOENT);
  CHECK(kelp::ErrnoOf((*v)->Delete(1, 0xabc).status()) == ENOENT);

  auto st = (*v)->GetStats();
  CHECK(st.file_count == 0);
  CHECK(st.delete_count == 1);
  CHECK(st.size ==
        format::kSuperblockSize + format::NeedleLength(5) + format::NeedleLength(14) + 32);
  CHECK(st.deleted_bytes == st.size - format::kSuperblockSize);
}

TEST_CASE("file names carry the collection, create refuses an existing volume") {
  TempDir dir;
  REQUIRE(Volume::Create(Opts(dir, 7, "pics")).ok());
  CHECK(std::filesystem::exists(dir.file("pics_7.dat")));
  CHECK(std::filesystem::exists(dir.file("pics_7.idx")));
  REQUIRE(Volume::Create(Opts(dir, 8)).ok());
  CHECK(std::filesystem::exists(dir.file("8.dat")));
  CHECK(kelp::ErrnoOf(Volume::Create(Opts(dir, 8)).status()) == EEXIST);
  auto bad = Opts(dir, 9, "../evil");
  CHECK_FALSE(Volume::Create(bad).ok());
  auto badrep = Opts(dir, 10);
  badrep.replication = "0x1";
  CHECK_FALSE(Volume::Create(badrep).ok());
}

TEST_CASE("reopen restores needles, deletes and the replication") {
  TempDir dir;
  {
    auto o = Opts(dir);
    o.replication = "010";
    auto v = Volume::Create(o);
    REQUIRE(v.ok());
    Fill(**v, 50);
    REQUIRE((*v)->Delete(10, 0xc0 + 10).ok());
    REQUIRE((*v)->Write(20, 0xc0 + 20, "replaced").ok());
  }
  auto v = Volume::Open(Opts(dir));
  REQUIRE(v.ok());
  CHECK((*v)->replication() == "010");
  CHECK((*v)->copies() == 2);
  std::string buf;
  CHECK(kelp::ErrnoOf((*v)->Read(10, 0xc0 + 10, &buf).status()) == ENOENT);
  CHECK(ReadBack(**v, 20, 0xc0 + 20) == "replaced");
  CHECK(ReadBack(**v, 49, 0xc0 + 49) == RandomBlob(49, 149));
  CHECK((*v)->GetStats().file_count == 49);
  CHECK((*v)->GetStats().max_key == 50);
}

TEST_CASE("recovery: a torn tail is cut, acknowledged needles survive") {
  TempDir dir;
  uint64_t good_size;
  {
    auto v = Volume::Create(Opts(dir));
    REQUIRE(v.ok());
    Fill(**v, 20);
    good_size = (*v)->GetStats().size;
  }
  const std::string dat = dir.file("1.dat");

  SECTION("half a needle") {
    std::string partial;
    EncodeNeedle(21, 1, std::string(500, 'z'), kelp::Hash64(std::string(500, 'z')), 1, &partial);
    Append(dat, partial.substr(0, 300));
  }
  SECTION("a whole needle with a bad checksum at the end") {
    std::string n;
    EncodeNeedle(21, 1, "abc", 12345, 1, &n);
    Append(dat, n);
  }
  SECTION("zeros, as a crash can leave behind") { Append(dat, std::string(4096, '\0')); }
  SECTION("a few bytes of header") { Append(dat, "\x01\x02\x03"); }

  auto v = Volume::Open(Opts(dir));
  REQUIRE(v.ok());
  CHECK((*v)->GetStats().size == good_size);
  CHECK(testing::FileSize(dat) == good_size);
  CheckFilled(**v, 20);
  CHECK_FALSE((*v)->SizeOf(21).has_value());
  // Appends continue cleanly after the cut.
  REQUIRE((*v)->Write(21, 5, "after").ok());
  v = Volume::Open(Opts(dir));
  REQUIRE(v.ok());
  CHECK(ReadBack(**v, 21, 5) == "after");
}

TEST_CASE("recovery: the index is rebuilt when missing, behind, torn or wrong") {
  TempDir dir;
  {
    auto v = Volume::Create(Opts(dir));
    REQUIRE(v.ok());
    Fill(**v, 30);
    REQUIRE((*v)->Delete(5, 0xc0 + 5).ok());
  }
  const std::string idx = dir.file("1.idx");
  const uint64_t full_idx = testing::FileSize(idx);
  REQUIRE(full_idx == 31 * format::kIndexRecordSize);

  SECTION("missing") { std::filesystem::remove(idx); }
  SECTION("behind") { Truncate(idx, 10 * format::kIndexRecordSize); }
  SECTION("torn record") { Truncate(idx, full_idx - 5); }
  SECTION("empty") { Truncate(idx, 0); }
  SECTION("last record points at the wrong needle") { Poke(idx, full_idx - 16, 0x01); }
  SECTION("a record beyond the .dat") {
    char rec[16];
    EncodeIndexRecord(IndexRecord{99, 1u << 30, 10}, rec);
    Append(idx, std::string_view(rec, 16));
  }

  auto v = Volume::Open(Opts(dir));
  REQUIRE(v.ok());
  CHECK(testing::FileSize(idx) == full_idx);
  std::string buf;
  CHECK(kelp::ErrnoOf((*v)->Read(5, 0xc0 + 5, &buf).status()) == ENOENT);
  for (uint64_t k = 1; k <= 30; ++k) {
    if (k != 5) REQUIRE(ReadBack(**v, k, 0xc0 + k) == RandomBlob(k, 100 + k));
  }
  CHECK((*v)->GetStats().file_count == 29);
}

TEST_CASE("a corrupt needle is an error on read, never data") {
  TempDir dir;
  auto v = Volume::Create(Opts(dir));
  REQUIRE(v.ok());
  Fill(**v, 3);
  auto h = (*v)->Find(2);
  REQUIRE(h.has_value());
  Poke(dir.file("1.dat"), h->data_offset() + 7, 0x40);
  std::string buf;
  uint64_t before = (*v)->checksum_failures();
  auto r = (*v)->Read(2, 0xc0 + 2, &buf);
  CHECK(r.status().code() == absl::StatusCode::kDataLoss);
  CHECK((*v)->checksum_failures() == before + 1);
  CHECK((*v)->Verify(*h, 0xc0 + 2).status().code() == absl::StatusCode::kDataLoss);
  CHECK(ReadBack(**v, 1, 0xc0 + 1) == RandomBlob(1, 101));
  CHECK(ReadBack(**v, 3, 0xc0 + 3) == RandomBlob(3, 103));

  SECTION("a rebuild skips it and keeps the needles after it") {
    v->reset();
    std::filesystem::remove(dir.file("1.idx"));
    auto reopened = Volume::Open(Opts(dir));
    REQUIRE(reopened.ok());
    CHECK_FALSE((*reopened)->SizeOf(2).has_value());
    CHECK(ReadBack(**reopened, 3, 0xc0 + 3) == RandomBlob(3, 103));
    CHECK((*reopened)->checksum_failures() == 1);
  }
}

TEST_CASE("Verify streams large needles and checks the cookie") {
  TempDir dir;
  auto v = Volume::Create(Opts(dir));
  REQUIRE(v.ok());
  std::string big = RandomBlob(9, (3 << 20) + 17);
  REQUIRE((*v)->Write(9, 99, big).ok());
  auto h = (*v)->Find(9);
  REQUIRE(h.has_value());
  CHECK(h->size == big.size());
  auto n = (*v)->Verify(*h, 99);
  REQUIRE(n.ok());
  CHECK(n->checksum == kelp::Hash64(big));
  CHECK(kelp::ErrnoOf((*v)->Verify(*h, 98).status()) == ENOENT);
  std::string buf;
  CHECK(ReadBack(**v, 9, 99) == big);
}

TEST_CASE("ReadRange checks only the blocks it reads, against sums taken at the write") {
  TempDir dir;
  auto v = Volume::Create(Opts(dir));
  REQUIRE(v.ok());
  constexpr uint64_t kBlock = BlockSums::kBlockSize;
  std::string big = RandomBlob(5, 20 * kBlock + 123);  // the last block is partial
  REQUIRE((*v)->Write(5, 55, big).ok());
  auto h = (*v)->Find(5);
  REQUIRE(h.has_value());
  std::string buf;
  auto read = [&](uint64_t off, uint64_t len) { return (*v)->ReadRange(*h, 55, off, len, &buf); };
  for (auto [off, len] : std::vector<std::pair<uint64_t, uint64_t>>{
           {0, 1}, {kBlock - 1, 2}, {3 * kBlock, kBlock}, {7, 5 * kBlock}, {big.size() - 100, 100}, {0, big.size()},
           {big.size(), 0}}) {
    auto n = read(off, len);
    REQUIRE(n.ok());
    CHECK(n->data == std::string_view(big).substr(off, len));
    CHECK(n->checksum == kelp::Hash64(big));
    CHECK(n->header.size == big.size());
  }
  CHECK(read(big.size() - 1, 2).status().code() == absl::StatusCode::kOutOfRange);
  CHECK(kelp::ErrnoOf((*v)->ReadRange(*h, 54, 0, 10, &buf).status()) == ENOENT);

  // Damage in block 9, after the sums were taken: block 9 is refused, others still read.
  Poke(dir.file("1.dat"), h->data_offset() + 9 * kBlock + 3, 0x20);
  uint64_t before = (*v)->checksum_failures();
  auto ok = read(2 * kBlock, 100);
  REQUIRE(ok.ok());
  CHECK(ok->data == std::string_view(big).substr(2 * kBlock, 100));
  CHECK(read(9 * kBlock - 10, 20).status().code() == absl::StatusCode::kDataLoss);
  CHECK((*v)->checksum_failures() == before + 1);
  // The sums went with the failure: the next ranged read verifies the whole needle again, and
  // it is corrupt.
  CHECK(read(0, 10).status().code() == absl::StatusCode::kDataLoss);

  SECTION("damage before the first ranged read: its block is refused and the others read") {
    REQUIRE((*v)->Write(6, 66, big).ok());
    auto h6 = (*v)->Find(6);
    REQUIRE(h6.has_value());
    Poke(dir.file("1.dat"), h6->data_offset() + 15 * kBlock, 0x01);
    auto first = (*v)->ReadRange(*h6, 66, 0, 10, &buf);
    REQUIRE(first.ok());
    CHECK(first->data == std::string_view(big).substr(0, 10));
    CHECK((*v)->ReadRange(*h6, 66, 15 * kBlock, 10, &buf).status().code() == absl::StatusCode::kDataLoss);
  }
  SECTION("after a restart the first ranged read verifies the needle whole") {
    REQUIRE((*v)->Write(6, 66, big).ok());
    v->reset();
    auto reopened = Volume::Open(Opts(dir));
    REQUIRE(reopened.ok());
    auto h6 = (*reopened)->Find(6);
    REQUIRE(h6.has_value());
    Poke(dir.file("1.dat"), h6->data_offset() + 15 * kBlock, 0x01);
    CHECK((*reopened)->ReadRange(*h6, 66, 0, 10, &buf).status().code() == absl::StatusCode::kDataLoss);
  }
  SECTION("a needle smaller than two blocks has no sums: a range of it is read whole") {
    std::string small = RandomBlob(8, BlockSums::kMinNeedle - 1);
    REQUIRE((*v)->Write(8, 88, small).ok());
    auto h8 = (*v)->Find(8);
    REQUIRE(h8.has_value());
    Poke(dir.file("1.dat"), h8->data_offset() + kBlock + 5, 0x01);
    CHECK((*v)->ReadRange(*h8, 88, 0, 10, &buf).status().code() == absl::StatusCode::kDataLoss);
  }
  SECTION("an overwrite is read at its new place, not with the old sums") {
    std::string other = RandomBlob(7, big.size());
    REQUIRE((*v)->Write(5, 55, other).ok());
    auto h2 = (*v)->Find(5);
    REQUIRE(h2.has_value());
    auto n = (*v)->ReadRange(*h2, 55, 4 * kBlock, 1000, &buf);
    REQUIRE(n.ok());
    CHECK(n->data == std::string_view(other).substr(4 * kBlock, 1000));
  }
}

TEST_CASE("Stat answers the size of live needles with the right cookie, without reading them") {
  TempDir dir;
  auto v = Volume::Create(Opts(dir));
  REQUIRE(v.ok());
  Fill(**v, 3);
  REQUIRE((*v)->Delete(2, 0xc0 + 2).ok());
  auto s1 = (*v)->Stat(1, 0xc0 + 1);
  REQUIRE(s1.ok());
  CHECK(*s1 == 101);
  CHECK(kelp::ErrnoOf((*v)->Stat(1, 0x99).status()) == ENOENT);  // another cookie
  CHECK(kelp::ErrnoOf((*v)->Stat(2, 0xc0 + 2).status()) == ENOENT);  // deleted
  CHECK(kelp::ErrnoOf((*v)->Stat(7, 0xc0 + 7).status()) == ENOENT);  // never written
  REQUIRE((*v)->Compact().ok());
  CHECK(*(*v)->Stat(3, 0xc0 + 3) == 103);
}

TEST_CASE("List pages through the live needles in key order with their cookies") {
  TempDir dir;
  auto v = Volume::Create(Opts(dir));
  REQUIRE(v.ok());
  Fill(**v, 5);
  REQUIRE((*v)->Delete(2, 0xc0 + 2).ok());
  bool more = false;
  auto page = (*v)->List(0, 2, &more);
  REQUIRE(page.ok());
  REQUIRE(page->size() == 2);
  CHECK(more);
  CHECK((*page)[0].key == 1);
  CHECK((*page)[0].cookie == 0xc0 + 1);
  CHECK((*page)[0].size == 101);
  CHECK((*page)[1].key == 3);  // 2 is deleted
  page = (*v)->List(3, 2, &more);
  REQUIRE(page.ok());
  CHECK(page->size() == 2);
  CHECK((*page)[1].key == 5);
  CHECK_FALSE(more);
}

TEST_CASE("a full volume turns read-only, deletes still work") {
  TempDir dir;
  auto o = Opts(dir);
  o.size_limit = 4096;
  auto v = Volume::Create(o);
  REQUIRE(v.ok());
  uint64_t k = 1;
  while (!(*v)->read_only()) REQUIRE((*v)->Write(k++, 1, std::string(1000, 'a')).ok());
  CHECK((*v)->GetStats().size >= 4096);
  CHECK((*v)->GetStats().read_only);
  CHECK(kelp::ErrnoOf((*v)->Write(k, 1, "more").status()) == EROFS);
  CHECK((*v)->Delete(1, 1).ok());
  (*v)->SetSizeLimit(1 << 20);
  CHECK_FALSE((*v)->read_only());
  CHECK((*v)->Write(k, 1, "more").ok());
  (*v)->SetReadOnly(true);
  CHECK(kelp::ErrnoOf((*v)->Write(k + 1, 1, "x").status()) == EROFS);
  CHECK(kelp::ErrnoOf((*v)->Delete(k, 1).status()) == EROFS);
}

TEST_CASE("a .dat that is not a volume is refused, not overwritten") {
  TempDir dir;
  Append(dir.file("3.dat"), std::string(100, 'q'));
  auto v = Volume::Open(Opts(dir, 3));
  CHECK_FALSE(v.ok());
  CHECK(testing::FileSize(dir.file("3.dat")) == 100);
}

namespace {

// Passes everything to the real file system and records the .dat's page-cache hints.
class HintRecorder : public EnvWrapper {
 public:
  HintRecorder() : EnvWrapper(Env::Default()) {}
  struct Hint {
    std::string path;
    bool drop;  // DropCached, else StartWriteback
    uint64_t offset, len;
  };
  absl::StatusOr<std::shared_ptr<File>> Open(const std::string& path, bool create) override {
    auto f = base_->Open(path, create);
    if (!f.ok()) return f;
    return std::shared_ptr<File>(std::make_shared<RecordingFile>(this, path, std::move(*f)));
  }
  std::vector<Hint> hints;  // the volume's writers are serialised; the test reads after them

 private:
  class RecordingFile : public File {
   public:
    RecordingFile(HintRecorder* env, std::string path, std::shared_ptr<File> base)
        : env_(env), path_(std::move(path)), base_(std::move(base)) {}
    absl::StatusOr<size_t> ReadAt(uint64_t o, size_t n, char* buf) const override { return base_->ReadAt(o, n, buf); }
    absl::StatusOr<size_t> WriteAt(uint64_t o, std::string_view d) override { return base_->WriteAt(o, d); }
    absl::Status Truncate(uint64_t size) override { return base_->Truncate(size); }
    absl::Status DataSync() override { return base_->DataSync(); }
    absl::StatusOr<uint64_t> Size() const override { return base_->Size(); }
    void StartWriteback(uint64_t o, uint64_t n) override {
      env_->hints.push_back({path_, false, o, n});
      base_->StartWriteback(o, n);
    }
    void DropCached(uint64_t o, uint64_t n) override {
      env_->hints.push_back({path_, true, o, n});
      base_->DropCached(o, n);
    }

   private:
    HintRecorder* const env_;
    const std::string path_;
    std::shared_ptr<File> base_;
  };
};

}  // namespace

TEST_CASE("a stream of appends goes to the device in steps and leaves the page cache behind it") {
  TempDir dir;
  HintRecorder env;
  Volume::Options o = Opts(dir);
  o.env = &env;
  auto v = Volume::Create(o);
  REQUIRE(v.ok());
  // 40 needles of 1 MiB: the 8 MiB steps start writing each step and drop the one before it.
  for (uint64_t k = 1; k <= 40; ++k) REQUIRE((*v)->Write(k, 7, RandomBlob(k, 1 << 20)).ok());
  auto check = [&] {
    // Every hint is about the one .dat being appended to (a compacted one was written under
    // another name); started ranges follow each other; a range is dropped only after it was
    // started, in the same order.
    std::vector<HintRecorder::Hint> started, dropped;
    for (const auto& h : env.hints) {
      CHECK(h.path == env.hints.front().path);
      (h.drop ? dropped : started).push_back(h);
    }
    REQUIRE(started.size() >= 2);
    CHECK(dropped.size() == started.size() - 1);
    for (size_t i = 0; i < started.size(); ++i) {
      CHECK(started[i].len >= (8u << 20));
      if (i > 0) CHECK(started[i].offset == started[i - 1].offset + started[i - 1].len);
      if (i < dropped.size()) {
        CHECK(dropped[i].offset == started[i].offset);
        CHECK(dropped[i].len == started[i].len);
      }
    }
  };
  check();
  CHECK(env.hints.front().path == Volume::BasePath(dir.path(), "", 1) + ".dat");
  CHECK(env.hints.front().offset == 16);  // the superblock is not part of the stream
  for (uint64_t k = 1; k <= 40; ++k) REQUIRE(ReadBack(**v, k, 7) == RandomBlob(k, 1 << 20));

  // Appends keys [first, last] to vol; the steps start at the end the .dat had before.
  auto stream_from_end = [&](Volume& vol, uint64_t first, uint64_t last) {
    uint64_t end = vol.GetStats().size;
    env.hints.clear();
    for (uint64_t k = first; k <= last; ++k) REQUIRE(vol.Write(k, 7, RandomBlob(k, 1 << 20)).ok());
    check();
    CHECK(env.hints.front().offset == end);
  };
  // After a compaction the steps start again at the end of the new file.
  for (uint64_t k = 1; k <= 20; ++k) REQUIRE((*v)->Delete(k, 7).ok());
  REQUIRE((*v)->Compact().ok());
  stream_from_end(**v, 41, 60);
  for (uint64_t k = 21; k <= 60; ++k) REQUIRE(ReadBack(**v, k, 7) == RandomBlob(k, 1 << 20));

  // And after a reopen.
  v->reset();
  auto again = Volume::Open(o);
  REQUIRE(again.ok());
  stream_from_end(**again, 61, 80);
  for (uint64_t k = 21; k <= 80; ++k) REQUIRE(ReadBack(**again, k, 7) == RandomBlob(k, 1 << 20));
}

TEST_CASE(
    "lazy writes ask for a sync behind them once every kSyncBehindBytes, synced writes never do") {
  TempDir dir("vol-sync-behind");
  auto v = Volume::Create(Opts(dir));
  REQUIRE(v.ok());
  const std::string blob = RandomBlob(1, 8 << 20);
  const uint64_t per_ask = Volume::kSyncBehindBytes / blob.size();  // 4 needles of 8 MiB and more
  std::vector<uint64_t> asked;
  for (uint64_t k = 1; k <= 3 * per_ask; ++k) {
    auto r = (*v)->Write(k, 7, blob);
    REQUIRE(r.ok());
    if (r->sync_behind) asked.push_back(k);
  }
  // A needle is a little more than its data, so each step of 4 whole needles reaches the bound.
  CHECK(asked == std::vector<uint64_t>{per_ask, 2 * per_ask, 3 * per_ask});
  for (uint64_t k = 100; k < 100 + 2 * per_ask; ++k) {
    auto r = (*v)->Write(k, 7, blob, /*sync=*/true);
    REQUIRE(r.ok());
    CHECK_FALSE(r->sync_behind);
  }
  (*v)->SyncBehind();  // a plain Sync: everything so far is durable, and the volume still takes
                       // writes
  REQUIRE((*v)->Write(500, 7, blob).ok());
  CHECK(ReadBack(**v, 500, 7) == blob);
}
