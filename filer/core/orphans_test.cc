#include <sys/stat.h>

#include "filer/core/test_util.h"

using namespace kelp::filer;
using namespace kelp::filer::testing;
using namespace std::chrono_literals;

namespace {

uint64_t CreateOpen(Harness& h, const std::string& session, const std::string& name) {
  uint64_t ino = h.Mkfile(1, name, session);
  CommitChunksRequest c;
  c.set_ino(ino);
  *c.add_chunks() = MakeChunk(Fid(ino), 0, 10);
  REQUIRE(h.fs->CommitChunks(c).ok());
  return ino;
}

}  // namespace

TEST_CASE("unlink while open keeps the inode until the last release") {
  Harness h(KELP_BACKENDS);
  auto s1 = h.fs->OpenSession("mount-1")->session();
  auto s2 = h.fs->OpenSession("mount-2")->session();
  CHECK(s1 != s2);
  uint64_t f = CreateOpen(h, s1, "f");
  REQUIRE(h.fs->Open(s2, f).ok());
  REQUIRE(h.fs->Open(s2, f).ok());  // opened twice in one session

  auto u = h.fs->Unlink(1, "f");
  REQUIRE(u.ok());
  CHECK(u->nlink() == 0);
  CHECK(Err(h.fs->Lookup(1, "f")) == ENOENT);
  // Still readable and writable through the open handles.
  CHECK(h.fs->GetChunks(f)->chunks_size() == 1);
  CommitChunksRequest c;
  c.set_ino(f);
  *c.add_chunks() = MakeChunk(Fid(9000), 10, 10);
  REQUIRE(h.fs->CommitChunks(c).ok());
  CHECK(Err(h.fs->Link(f, 1, "relink")) == ENOENT);
  h.RequireConsistent();

  REQUIRE(h.fs->Release(s1, f).ok());
  REQUIRE(h.fs->Release(s2, f).ok());
  CHECK(h.fs->GetAttr(f).ok());
  CHECK(h.GcFids().empty());
  REQUIRE(h.fs->Release(s2, f).ok());
  CHECK(Err(h.fs->GetAttr(f)) == ENOENT);
  CHECK(h.GcFids() == std::vector<std::string>{Fid(f), Fid(9000)});
  CHECK(h.fs->Release(s2, f).ok());  // extra releases are harmless
  h.RequireConsistent();
}

TEST_CASE("one release call drops each inode as often as it is listed, and purges the orphans it frees") {
  Harness h(KELP_BACKENDS);
  auto s = h.fs->OpenSession("m")->session();
  uint64_t f = CreateOpen(h, s, "f");
  uint64_t g = CreateOpen(h, s, "g");
  uint64_t k = CreateOpen(h, s, "k");
  REQUIRE(h.fs->Open(s, f).ok());  // f: two handles
  REQUIRE(h.fs->Open(s, k).ok());  // k: two handles, one released below
  REQUIRE(h.fs->Unlink(1, "f").ok());
  REQUIRE(h.fs->Unlink(1, "g").ok());
  REQUIRE(h.fs->Unlink(1, "k").ok());
  REQUIRE(h.fs->Release(s, std::vector<uint64_t>{f, g, f, k, 424242}).ok());  // an unknown inode too
  CHECK(Err(h.fs->GetAttr(f)) == ENOENT);
  CHECK(Err(h.fs->GetAttr(g)) == ENOENT);
  CHECK(h.fs->GetAttr(k).ok());  // still held once
  CHECK(h.GcFids() == std::vector<std::string>{Fid(f), Fid(g)});
  h.RequireConsistent();
  REQUIRE(h.fs->Release(s, std::vector<uint64_t>{k}).ok());
  CHECK(Err(h.fs->GetAttr(k)) == ENOENT);
  h.RequireConsistent();
}

TEST_CASE("a lapsed session releases its open files") {
  Harness h(KELP_BACKENDS);
  auto open = h.fs->OpenSession("m");
  REQUIRE(open.ok());
  CHECK(open->lease_ms() == 10'000 / 3);
  std::string s = open->session();
  uint64_t f = CreateOpen(h, s, "f");
  REQUIRE(h.fs->Unlink(1, "f").ok());

  // KeepAlive holds the lease.
  h.clock.Advance(8s);
  REQUIRE(h.fs->KeepAlive(s, {}, false).ok());
  h.clock.Advance(8s);
  h.fs->RunMaintenance();
  CHECK(h.fs->GetAttr(f).ok());

  h.clock.Advance(11s);
  h.fs->RunMaintenance();
  CHECK(Err(h.fs->GetAttr(f)) == ENOENT);
  CHECK(h.fs->KeepAlive(s, {}, false).code() == absl::StatusCode::kNotFound);
  CHECK(h.fs->Open(s, h.Mkfile(1, "g")).code() == absl::StatusCode::kNotFound);
  CHECK(Err(h.fs->Open(s, 4242)) == ENOENT);
  h.RequireConsistent();
}

TEST_CASE("a start that finds no sessions in the store keeps no orphan for a grace period") {
  Harness h("rocksdb", [](FilerOptions& o) { o.orphan_grace = std::chrono::milliseconds(30'000); });
  // No mount can be re-announcing open files to a store that held no session: the last
  // release purges at once (the blobs go back to that release's caller).
  std::string s = h.fs->OpenSession("m")->session();
  uint64_t f = CreateOpen(h, s, "f");
  REQUIRE(h.fs->Unlink(1, "f").ok());
  CHECK(h.fs->GetAttr(f).ok());  // held open
  REQUIRE(h.fs->Release(s, f).ok());
  CHECK(Err(h.fs->GetAttr(f)) == ENOENT);
  // A start that finds the session keeps its orphans through the grace period.
  uint64_t g = CreateOpen(h, s, "g");
  REQUIRE(h.fs->Unlink(1, "g").ok());
  h.Restart();
  REQUIRE(h.fs->KeepAlive(s, {}, false).ok());
  REQUIRE(h.fs->Release(s, g).ok());
  CHECK(h.fs->GetAttr(g).ok());
  h.clock.Advance(31s);
  REQUIRE(h.fs->KeepAlive(s, {}, false).ok());
  h.fs->RunMaintenance();
  CHECK(Err(h.fs->GetAttr(g)) == ENOENT);
  h.RequireConsistent();
}

TEST_CASE("sessions survive a restart, and after one lapses its orphans wait for it to reattach") {
  Harness h("rocksdb", [](FilerOptions& o) { o.orphan_grace = std::chrono::milliseconds(30'000); });
  std::string s = h.fs->OpenSession("m")->session();
  uint64_t kept = CreateOpen(h, s, "kept");
  uint64_t lost = CreateOpen(h, s, "lost");
  REQUIRE(h.fs->Unlink(1, "kept").ok());
  REQUIRE(h.fs->Unlink(1, "lost").ok());

  h.Restart();  // sessions and opens are in the store
  REQUIRE(h.fs->KeepAlive(s, {}, false).ok());
  h.fs->RunMaintenance();
  CHECK(h.fs->GetAttr(kept).ok());
  CHECK(h.fs->GetAttr(lost).ok());

  // The mount stays away past its lease: its session lapses, but within the grace period
  // after the start its orphans stay.
  h.clock.Advance(11s);
  h.fs->RunMaintenance();
  CHECK(h.fs->GetAttr(kept).ok());
  CHECK(h.fs->GetAttr(lost).ok());
  // The mount notices (NOT_FOUND) and reattaches with what it still holds open.
  CHECK(h.fs->KeepAlive(s, {}, false).code() == absl::StatusCode::kNotFound);
  REQUIRE(h.fs->KeepAlive(s, {kept, 987654}, true).ok());
  for (int i = 0; i < 4; ++i) {  // past the grace period, keeping the lease
    h.clock.Advance(8s);
    REQUIRE(h.fs->KeepAlive(s, {}, false).ok());
    h.fs->RunMaintenance();
  }
  CHECK(h.fs->GetAttr(kept).ok());
  CHECK(Err(h.fs->GetAttr(lost)) == ENOENT);
  REQUIRE(h.fs->Release(s, kept).ok());
  CHECK(Err(h.fs->GetAttr(kept)) == ENOENT);
  h.RequireConsistent();
}

TEST_CASE("a removed directory held open refuses new entries") {
  Harness h(KELP_BACKENDS);
  std::string s = h.fs->OpenSession("m")->session();
  uint64_t d = h.Mkdir(1, "d");
  REQUIRE(h.fs->Open(s, d).ok());
  REQUIRE(h.fs->Rmdir(1, "d").ok());
  CHECK(h.fs->GetAttr(d)->nlink() == 0);
  CreateArgs a;
  a.parent = d;
  a.name = "x";
  CHECK(Err(h.fs->Create(a)) == ENOENT);
  CHECK(h.Names(d).empty());
  h.RequireConsistent();
  REQUIRE(h.fs->Release(s, d).ok());
  CHECK(Err(h.fs->GetAttr(d)) == ENOENT);
  h.RequireConsistent();
}
