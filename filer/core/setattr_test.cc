#include <sys/stat.h>

#include "filer/client/chunk_intervals.h"
#include "filer/core/test_util.h"

using namespace kelp::filer;
using namespace kelp::filer::testing;
using namespace std::chrono_literals;

namespace {

SetAttrRequest Req(uint64_t ino, uint32_t valid) {
  SetAttrRequest r;
  r.set_ino(ino);
  r.set_valid(valid);
  return r;
}

}  // namespace

TEST_CASE("setattr: mode, owner, times") {
  Harness h(KELP_BACKENDS);
  uint64_t f = h.Mkfile(1, "f");
  auto r = Req(f, SET_ATTR_MODE | SET_ATTR_UID | SET_ATTR_GID);
  r.set_mode(S_IFDIR | 04711);  // type bits are ignored
  r.set_uid(5);
  r.set_gid(6);
  h.clock.Advance(1s);
  auto a = h.fs->SetAttr(r);
  REQUIRE(a.ok());
  CHECK(a->mode() == (S_IFREG | 04711));
  CHECK(a->uid() == 5);
  CHECK(a->gid() == 6);
  CHECK(a->ctime_ns() == h.clock.WallNs());

  r = Req(f, SET_ATTR_ATIME | SET_ATTR_MTIME);
  r.set_atime_ns(123);
  r.set_mtime_ns(-456);  // before the epoch
  a = h.fs->SetAttr(r);
  CHECK(a->atime_ns() == 123);
  CHECK(a->mtime_ns() == -456);
  h.clock.Advance(1s);
  r = Req(f, SET_ATTR_ATIME | SET_ATTR_ATIME_NOW | SET_ATTR_MTIME | SET_ATTR_MTIME_NOW);
  a = h.fs->SetAttr(r);
  CHECK(a->atime_ns() == h.clock.WallNs());
  CHECK(a->mtime_ns() == h.clock.WallNs());
  r = Req(f, SET_ATTR_CTIME);
  r.set_ctime_ns(42);
  CHECK(h.fs->SetAttr(r)->ctime_ns() == 42);
  CHECK(Err(h.fs->SetAttr(Req(999, SET_ATTR_MODE))) == ENOENT);
  auto v1 = h.fs->GetAttr(f)->version();
  REQUIRE(h.fs->SetAttr(Req(f, SET_ATTR_UID)).ok());
  CHECK(h.fs->GetAttr(f)->version() > v1);
}

TEST_CASE("truncate: shrink trims and collects chunks, grow reads zeros") {
  Harness h(KELP_BACKENDS);
  uint64_t f = h.Mkfile(1, "f");
  CommitChunksRequest c;
  c.set_ino(f);
  *c.add_chunks() = MakeChunk(Fid(1), 0, 100);
  *c.add_chunks() = MakeChunk(Fid(2), 100, 100);
  *c.add_chunks() = MakeChunk(Fid(3), 150, 100);
  // One blob referenced twice: records at different blob offsets.
  *c.add_chunks() = MakeChunk(Fid(4), 300, 50, 0);
  *c.add_chunks() = MakeChunk(Fid(4), 20, 10, 50);
  REQUIRE(h.fs->CommitChunks(c).ok());
  CHECK(h.fs->GetAttr(f)->size() == 350);

  auto r = Req(f, SET_ATTR_SIZE);
  r.set_size(120);
  h.clock.Advance(1s);
  auto a = h.fs->SetAttr(r);
  REQUIRE(a.ok());
  CHECK(a->size() == 120);
  CHECK(a->mtime_ns() == h.clock.WallNs());
  // Fid(3) and the first Fid(4) record are past the end; Fid(4) is still referenced at 20.
  CHECK(h.GcFids() == std::vector<std::string>{Fid(3)});
  auto chunks = h.fs->GetChunks(f);
  REQUIRE(chunks.ok());
  REQUIRE(chunks->chunks_size() == 3);
  CHECK(chunks->chunks(1).fid() == Fid(2));
  CHECK(chunks->chunks(1).size() == 20);  // trimmed at the new end

  r.set_size(1000);
  REQUIRE(h.fs->SetAttr(r).ok());
  chunks = h.fs->GetChunks(f);
  auto ivs = ResolveVisibleIntervals(chunks->chunks(), chunks->attr().size());
  REQUIRE(ivs.back().source == VisibleInterval::Source::kHole);
  CHECK(ivs.back().offset == 120);  // the old bytes 120..350 do not come back
  CHECK(ivs.back().end() == 1000);

  r.set_size(0);
  REQUIRE(h.fs->SetAttr(r).ok());
  CHECK(h.GcFids() == std::vector<std::string>{Fid(1), Fid(2), Fid(3), Fid(4)});
  CHECK(h.fs->GetChunks(f)->chunks_size() == 0);
  h.RequireConsistent();
}

TEST_CASE("truncate of inline data, directories and special files") {
  Harness h(KELP_BACKENDS);
  uint64_t f = h.Mkfile(1, "f");
  REQUIRE(h.fs->WriteInline(f, "hello world", 0, false).ok());
  auto r = Req(f, SET_ATTR_SIZE);
  r.set_size(5);
  REQUIRE(h.fs->SetAttr(r).ok());
  CHECK(h.fs->GetChunks(f)->inline_data() == "hello");
  r.set_size(8);
  REQUIRE(h.fs->SetAttr(r).ok());
  auto g = h.fs->GetChunks(f);
  CHECK(g->inline_data() == "hello");
  CHECK(g->attr().size() == 8);  // bytes 5..8 read as zeros

  uint64_t d = h.Mkdir(1, "d");
  CHECK(Err(h.fs->SetAttr(Req(d, SET_ATTR_SIZE))) == EISDIR);
  CreateArgs fifo;
  fifo.parent = 1;
  fifo.name = "p";
  fifo.mode = S_IFIFO | 0600;
  uint64_t p = h.fs->Create(fifo)->ino();
  CHECK(Err(h.fs->SetAttr(Req(p, SET_ATTR_SIZE))) == EINVAL);
  r.set_size(1ULL << 61);
  CHECK(Err(h.fs->SetAttr(r)) == EFBIG);
  h.RequireConsistent();
}
