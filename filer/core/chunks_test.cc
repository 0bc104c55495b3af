#include <sys/stat.h>

#include "filer/client/chunk_intervals.h"
#include "filer/client/limits.h"
#include "filer/core/test_util.h"

using namespace kelp::filer;
using namespace kelp::filer::testing;
using namespace std::chrono_literals;

namespace {

// What each byte of the file reads as: (fid, blob position), inline byte, or a hole.
std::vector<std::string> View(const GetChunksResponse& g) {
  std::vector<std::string> bytes;
  for (const auto& iv :
       ResolveVisibleIntervals(g.chunks(), g.attr().size(), g.inline_data().size())) {
    for (uint64_t i = 0; i < iv.size; ++i) {
      switch (iv.source) {
        case VisibleInterval::Source::kHole: bytes.push_back("0"); break;
        case VisibleInterval::Source::kInline:
          bytes.push_back(std::string("i") + g.inline_data()[iv.offset + i]);
          break;
        case VisibleInterval::Source::kChunk:
          bytes.push_back(iv.chunk->fid() + "@" + std::to_string(iv.blob_offset + i));
          break;
      }
    }
  }
  return bytes;
}

}  // namespace

TEST_CASE("commit chunks: filer-assigned seqs, size and mtime") {
  Harness h(KELP_BACKENDS);
  uint64_t f = h.Mkfile(1, "f");
  CommitChunksRequest c;
  c.set_ino(f);
  *c.add_chunks() = MakeChunk(Fid(1), 0, 100);
  *c.add_chunks() = MakeChunk(Fid(2), 50, 100);
  c.set_min_size(120);
  h.clock.Advance(1s);
  auto r = h.fs->CommitChunks(c);
  REQUIRE(r.ok());
  REQUIRE(r->seqs_size() == 2);
  CHECK(r->seqs(1) > r->seqs(0));
  CHECK(r->attr().size() == 150);
  CHECK(r->attr().mtime_ns() == h.clock.WallNs());

  CommitChunksRequest c2;
  c2.set_ino(f);
  *c2.add_chunks() = MakeChunk(Fid(3), 0, 10);
  c2.set_min_size(4096);
  c2.set_mtime_ns(77);
  c2.set_sync(true);
  auto r2 = h.fs->CommitChunks(c2);
  REQUIRE(r2.ok());
  CHECK(r2->seqs(0) > r->seqs(1));
  CHECK(r2->attr().size() == 4096);
  CHECK(r2->attr().mtime_ns() == 77);

  auto g = h.fs->GetChunks(f);
  REQUIRE(g.ok());
  REQUIRE(g->chunks_size() == 3);
  CHECK(g->chunks(0).fid() == Fid(1));
  CHECK(g->chunks(2).fid() == Fid(3));
  CHECK(g->chunks(2).seq() == r2->seqs(0));
  CHECK(g->attr().version() == r2->attr().version());
  auto v = View(*g);
  CHECK(v[0] == Fid(3) + "@0");
  CHECK(v[10] == Fid(1) + "@10");
  CHECK(v[60] == Fid(2) + "@10");
  CHECK(v[200] == "0");
}

TEST_CASE("commit chunks: bad input") {
  Harness h(KELP_BACKENDS);
  uint64_t f = h.Mkfile(1, "f");
  uint64_t d = h.Mkdir(1, "d");
  CommitChunksRequest c;
  c.set_ino(d);
  *c.add_chunks() = MakeChunk(Fid(1), 0, 10);
  CHECK(Err(h.fs->CommitChunks(c)) == EISDIR);
  c.set_ino(999);
  CHECK(Err(h.fs->CommitChunks(c)) == ENOENT);
  c.set_ino(f);
  c.mutable_chunks(0)->set_fid("not-a-fid");
  CHECK(Err(h.fs->CommitChunks(c)) == EINVAL);
  *c.mutable_chunks(0) = MakeChunk(Fid(1), 0, 0);
  CHECK(Err(h.fs->CommitChunks(c)) == EINVAL);
  *c.mutable_chunks(0) = MakeChunk(Fid(1), kMaxFileSize - 5, 10);
  CHECK(Err(h.fs->CommitChunks(c)) == EFBIG);
  *c.mutable_chunks(0) = MakeChunk(Fid(1), 0, 10, 95);
  c.mutable_chunks(0)->set_blob_size(100);
  CHECK(Err(h.fs->CommitChunks(c)) == EINVAL);
  auto s = h.fs->Symlink(1, "l", "t", 0, 0);
  c.set_ino(s->ino());
  *c.mutable_chunks(0) = MakeChunk(Fid(1), 0, 10);
  CHECK(Err(h.fs->CommitChunks(c)) == EINVAL);
  CHECK(h.fs->GetChunks(f)->chunks_size() == 0);
}

TEST_CASE("commit costs O(new chunks)") {
  Harness h(KELP_BACKENDS);
  uint64_t f = h.Mkfile(1, "f");
  for (int i = 0; i < 40; ++i) {
    CommitChunksRequest c;
    c.set_ino(f);
    *c.add_chunks() = MakeChunk(Fid(100 + i), i * 10, 10);
    size_t scans = h.counting->scans_;
    REQUIRE(h.fs->CommitChunks(c).ok());
    CHECK(h.counting->scans_ == scans);      // never reads the existing list
    CHECK(h.counting->last_batch_ <= 3);     // record + inode + event
  }
  CHECK(h.fs->GetChunks(f)->chunks_size() == 40);
}

TEST_CASE("compaction drops shadowed records and collects their blobs") {
  Harness h(KELP_BACKENDS, [](FilerOptions& o) { o.compact_min_chunks = 8; });
  uint64_t f = h.Mkfile(1, "f");
  // A base blob covering [0, 1000), then many small overwrites. One blob (Fid(50)) is
  // referenced by two records: one gets shadowed, the other stays visible.
  CommitChunksRequest base;
  base.set_ino(f);
  *base.add_chunks() = MakeChunk(Fid(1), 0, 1000);
  *base.add_chunks() = MakeChunk(Fid(50), 0, 10, 0);
  *base.add_chunks() = MakeChunk(Fid(50), 900, 10, 100);
  REQUIRE(h.fs->CommitChunks(base).ok());
  std::vector<std::string> before;
  for (int i = 0; i < 12; ++i) {
    CommitChunksRequest c;
    c.set_ino(f);
    *c.add_chunks() = MakeChunk(Fid(200 + i), 0, 100);  // each hides the one before
    REQUIRE(h.fs->CommitChunks(c).ok());
    if (i == 4) before = View(*h.fs->GetChunks(f));
  }
  auto g = h.fs->GetChunks(f);
  REQUIRE(g.ok());
  // Visible: the last overwrite, the base, and Fid(50)'s second record.
  CHECK(g->chunks_size() <= 8);
  auto gc = h.GcFids();
  CHECK(std::find(gc.begin(), gc.end(), Fid(50)) == gc.end());
  CHECK(std::find(gc.begin(), gc.end(), Fid(1)) == gc.end());
  CHECK(std::find(gc.begin(), gc.end(), Fid(211)) == gc.end());
  CHECK(std::find(gc.begin(), gc.end(), Fid(200)) != gc.end());
  auto after = View(*g);
  REQUIRE(after.size() == 1000);
  CHECK(after[0] == Fid(211) + "@0");
  CHECK(after[905] == Fid(50) + "@105");
  CHECK(after[500] == Fid(1) + "@500");
  CHECK(before[500] == after[500]);
  h.RequireConsistent();
}

TEST_CASE("write inline replaces the content and collects chunks") {
  Harness h(KELP_BACKENDS);
  uint64_t f = h.Mkfile(1, "f");
  CommitChunksRequest c;
  c.set_ino(f);
  *c.add_chunks() = MakeChunk(Fid(1), 0, 100000);
  REQUIRE(h.fs->CommitChunks(c).ok());
  h.clock.Advance(1s);
  auto a = h.fs->WriteInline(f, "tiny", 0, true);
  REQUIRE(a.ok());
  CHECK(a->size() == 4);
  CHECK(a->mtime_ns() == h.clock.WallNs());
  auto g = h.fs->GetChunks(f);
  CHECK(g->inline_data() == "tiny");
  CHECK(g->chunks_size() == 0);
  CHECK(h.GcFids() == std::vector<std::string>{Fid(1)});

  // Chunks committed on top of inline data overlay it; inline stays the bottom layer.
  CommitChunksRequest over;
  over.set_ino(f);
  *over.add_chunks() = MakeChunk(Fid(2), 2, 4);
  REQUIRE(h.fs->CommitChunks(over).ok());
  auto v = View(*h.fs->GetChunks(f));
  CHECK(v == std::vector<std::string>{"it", "ii", Fid(2) + "@0", Fid(2) + "@1", Fid(2) + "@2",
                                      Fid(2) + "@3"});

  CHECK(Err(h.fs->WriteInline(f, std::string(kMaxInlineSize + 1, 'x'), 0, false)) == EINVAL);
  CHECK(h.fs->WriteInline(f, std::string(kMaxInlineSize, 'x'), 0, false).ok());
  CHECK(h.fs->WriteInline(f, "", 0, false)->size() == 0);
  CHECK(Err(h.fs->WriteInline(h.Mkdir(1, "d"), "x", 0, false)) == EISDIR);
  CHECK(Err(h.fs->WriteInline(999, "x", 0, false)) == ENOENT);
  CHECK(h.GcFids() == std::vector<std::string>{Fid(1), Fid(2)});
  h.RequireConsistent();
}

TEST_CASE("commit with replace drops the old content in the same batch") {
  Harness h(KELP_BACKENDS);
  uint64_t f = h.Mkfile(1, "f");
  REQUIRE(h.fs->WriteInline(f, "old inline bytes", 0, false).ok());
  CommitChunksRequest c;
  c.set_ino(f);
  *c.add_chunks() = MakeChunk(Fid(1), 0, 1000);
  *c.add_chunks() = MakeChunk(Fid(2), 1000, 1000);
  REQUIRE(h.fs->CommitChunks(c).ok());
  CHECK(h.GcFids().empty());

  // A shorter file replaces a longer one: the size shrinks to the new reach.
  CommitChunksRequest r;
  r.set_ino(f);
  r.set_replace(true);
  *r.add_chunks() = MakeChunk(Fid(3), 0, 300);
  auto a = h.fs->CommitChunks(r);
  REQUIRE(a.ok());
  CHECK(a->attr().size() == 300);
  auto g = h.fs->GetChunks(f);
  REQUIRE(g.ok());
  CHECK(g->inline_data().empty());
  REQUIRE(g->chunks_size() == 1);
  CHECK(g->chunks(0).fid() == Fid(3));
  CHECK(h.GcFids() == std::vector<std::string>{Fid(1), Fid(2)});

  // Replace with nothing but min_size: a file of zeros.
  CommitChunksRequest z;
  z.set_ino(f);
  z.set_replace(true);
  z.set_min_size(10);
  auto b = h.fs->CommitChunks(z);
  REQUIRE(b.ok());
  CHECK(b->attr().size() == 10);
  CHECK(View(*h.fs->GetChunks(f)) == std::vector<std::string>(10, "0"));
  CHECK(h.GcFids() == std::vector<std::string>{Fid(1), Fid(2), Fid(3)});
  h.RequireConsistent();
}

TEST_CASE("statfs and fsync") {
  Harness h(KELP_BACKENDS);
  h.Mkfile(1, "a");
  h.Mkdir(1, "b");
  auto s = h.fs->StatFs();
  REQUIRE(s.ok());
  CHECK(s->block_size() == 4096);
  CHECK(s->total_blocks() == (1ULL << 40) / 4096);
  CHECK(s->free_blocks() == (1ULL << 39) / 4096);
  CHECK(s->total_files() - s->free_files() == 3);
  CHECK(s->name_max() == 255);
  CHECK(h.fs->Fsync(1).ok());
  CHECK(Err(h.fs->Fsync(999)) == ENOENT);
  CHECK(Err(h.fs->GetChunks(1)) == EISDIR);
}
