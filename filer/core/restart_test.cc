#include <sys/stat.h>

#include "filer/core/test_util.h"

using namespace kelp::filer;
using namespace kelp::filer::testing;
using namespace std::chrono_literals;

TEST_CASE("restart: everything acknowledged is there, sequences never repeat") {
  Harness h("rocksdb");
  uint64_t d = h.Mkdir(1, "d");
  uint64_t f = h.Mkfile(d, "f");
  REQUIRE(h.fs->Link(f, 1, "hard").ok());
  REQUIRE(h.fs->SetXattr(f, "user.k", "v", 0).ok());
  CommitChunksRequest c;
  c.set_ino(f);
  *c.add_chunks() = MakeChunk(Fid(1), 0, 100);
  auto committed = h.fs->CommitChunks(c);
  REQUIRE(committed.ok());
  uint64_t small = h.Mkfile(d, "small");
  REQUIRE(h.fs->WriteInline(small, "inline!", 0, false).ok());
  REQUIRE(h.fs->Symlink(d, "l", "f", 0, 0).ok());
  h.cluster.SetFail(true);
  uint64_t gone = h.Mkfile(1, "gone");
  CommitChunksRequest g;
  g.set_ino(gone);
  *g.add_chunks() = MakeChunk(Fid(2), 0, 1);
  REQUIRE(h.fs->CommitChunks(g).ok());
  REQUIRE(h.fs->Unlink(1, "gone").ok());
  auto sub = h.fs->Subscribe(1, "");
  size_t events_before = 0;
  for (;;) {
    auto b = (*sub)->Next(1000, 0ms);
    if (b->empty()) break;
    events_before += b->size();
  }
  uint64_t last_seq = (*sub)->cursor() - 1;
  int64_t inodes = h.fs->InodeCount();
  sub->reset();

  h.Restart();
  CHECK(h.fs->InodeCount() == inodes);
  CHECK(h.fs->ResolvePath("/d/f")->ino() == f);
  CHECK(h.fs->GetAttr(f)->nlink() == 2);
  CHECK(*h.fs->GetXattr(f, "user.k") == "v");
  auto chunks = h.fs->GetChunks(f);
  REQUIRE(chunks->chunks_size() == 1);
  CHECK(chunks->chunks(0).seq() == committed->seqs(0));
  CHECK(h.fs->GetChunks(small)->inline_data() == "inline!");
  CHECK(h.fs->Lookup(d, "l")->symlink_target() == "f");
  CHECK(h.GcFids() == std::vector<std::string>{Fid(2)});
  CHECK(h.Names(d) == std::vector<std::string>{"f", "small", "l"});

  // New numbers are above everything handed out before.
  uint64_t fresh = h.Mkfile(d, "fresh");
  CHECK(fresh > gone);
  CommitChunksRequest c2;
  c2.set_ino(f);
  *c2.add_chunks() = MakeChunk(Fid(3), 0, 10);
  CHECK(h.fs->CommitChunks(c2)->seqs(0) > committed->seqs(0));
  auto replay = h.fs->Subscribe(1, "");
  size_t events_after = 0;
  uint64_t newest = 0;
  for (;;) {
    auto b = (*replay)->Next(1000, 0ms);
    if (b->empty()) break;
    events_after += b->size();
    newest = b->back().seq();
  }
  CHECK(events_after == events_before + 2);
  CHECK(newest > last_seq);
  h.RequireConsistent();
}
