// PowerCutEnv: what a "power cut" (the process gone, its memory with it) leaves on disk, and
// that a volume written through it recovers to its last sync.
#include <catch2/catch.hpp>

#include "volume/store/power_cut_env.h"
#include "volume/store/test_util.h"
#include "volume/store/volume.h"

using namespace kelp::volume;
using kelp::volume::testing::RandomBlob;
using kelp::volume::testing::TempDir;

namespace {

std::string ReadAll(const File& f) {
  auto size = f.Size();
  REQUIRE(size.ok());
  std::string s(*size, '\0');
  REQUIRE(ReadFully(f, 0, s.size(), s.data()).ok());
  return s;
}

// The file as the disk holds it: what a restart after a power cut finds.
std::string OnDisk(const std::string& path) {
  auto f = Env::Default()->Open(path, false);
  REQUIRE(f.ok());
  return ReadAll(**f);
}

}  // namespace

TEST_CASE("PowerCutEnv: unsynced writes are lost, synced ones survive, reads see both") {
  TempDir dir;
  const std::string path = dir.file("f");
  {
    PowerCutEnv env;
    auto f = env.Open(path, true);
    REQUIRE(f.ok());
    REQUIRE(WriteFully(**f, 0, "hello ").ok());
    REQUIRE(WriteFully(**f, 6, "world").ok());
    CHECK(ReadAll(**f) == "hello world");
    CHECK(OnDisk(path).empty());
    CHECK(env.unsynced_bytes() == 11);
    REQUIRE((*f)->DataSync().ok());
    CHECK(OnDisk(path) == "hello world");
    CHECK(env.unsynced_bytes() == 0);

    REQUIRE(WriteFully(**f, 0, "J").ok());      // overwrite inside the synced part
    REQUIRE(WriteFully(**f, 11, "!!!").ok());   // append
    REQUIRE(WriteFully(**f, 16, "gap").ok());   // past the end: a hole of zeros
    CHECK(ReadAll(**f) == std::string("Jello world!!!\0\0gap", 19));
    auto size = (*f)->Size();
    REQUIRE(size.ok());
    CHECK(*size == 19);
    // A second handle on the same path sees the same unsynced bytes.
    auto g = env.Open(path, false);
    REQUIRE(g.ok());
    CHECK(ReadAll(**g) == ReadAll(**f));
    // Reads of a piece straddling synced and unsynced bytes.
    char buf[6];
    auto n = (*f)->ReadAt(9, 6, buf);
    REQUIRE(n.ok());
    CHECK(std::string(buf, *n) == std::string("ld!!!\0", 6));
    CHECK(OnDisk(path) == "hello world");
  }
  // The env is gone without a sync: the power cut.
  CHECK(OnDisk(path) == "hello world");
}

TEST_CASE("PowerCutEnv: overlapping rewrites keep the newest bytes") {
  TempDir dir;
  PowerCutEnv env;
  auto f = env.Open(dir.file("f"), true);
  REQUIRE(f.ok());
  REQUIRE(WriteFully(**f, 0, "aaaaaaaaaa").ok());
  REQUIRE(WriteFully(**f, 20, "cccccccccc").ok());
  REQUIRE(WriteFully(**f, 5, std::string(20, 'b')).ok());  // over the end of one, into the other
  REQUIRE(WriteFully(**f, 2, "x").ok());                   // inside one range
  const std::string want = "aaxaa" + std::string(20, 'b') + "ccccc";
  CHECK(ReadAll(**f) == want);
  CHECK(env.unsynced_bytes() == want.size());
  REQUIRE((*f)->DataSync().ok());
  CHECK(OnDisk(dir.file("f")) == want);
}

TEST_CASE("PowerCutEnv: truncate acts on the unsynced view and reaches the disk at sync") {
  TempDir dir;
  const std::string path = dir.file("f");
  PowerCutEnv env;
  auto f = env.Open(path, true);
  REQUIRE(f.ok());
  REQUIRE(WriteFully(**f, 0, "0123456789").ok());
  REQUIRE((*f)->DataSync().ok());

  SECTION("shrink: the cut bytes are gone from reads, on disk only after a sync") {
    REQUIRE(WriteFully(**f, 10, "abc").ok());
    REQUIRE((*f)->Truncate(4).ok());
    CHECK(ReadAll(**f) == "0123");
    CHECK(OnDisk(path) == "0123456789");
    REQUIRE((*f)->DataSync().ok());
    CHECK(OnDisk(path) == "0123");
  }
  SECTION("shrink then grow: the grown part reads as zeros, not as the old bytes") {
    REQUIRE((*f)->Truncate(3).ok());
    REQUIRE((*f)->Truncate(6).ok());
    REQUIRE(WriteFully(**f, 5, "Z").ok());
    CHECK(ReadAll(**f) == std::string("012\0\0Z", 6));
    CHECK(OnDisk(path) == "0123456789");
    REQUIRE((*f)->DataSync().ok());
    CHECK(OnDisk(path) == std::string("012\0\0Z", 6));
  }
}

TEST_CASE("PowerCutEnv: rename and remove carry the unsynced bytes with the path") {
  TempDir dir;
  PowerCutEnv env;
  auto f = env.Open(dir.file("a"), true);
  REQUIRE(f.ok());
  REQUIRE(WriteFully(**f, 0, "moved").ok());
  REQUIRE(env.Rename(dir.file("a"), dir.file("b")).ok());
  auto b = env.Open(dir.file("b"), false);
  REQUIRE(b.ok());
  CHECK(ReadAll(**b) == "moved");
  CHECK_FALSE(env.Exists(dir.file("a")));
  REQUIRE(env.Remove(dir.file("b")).ok());
  CHECK(env.unsynced_bytes() == 0);
  auto again = env.Open(dir.file("b"), true);
  REQUIRE(again.ok());
  CHECK(ReadAll(**again).empty());
}

TEST_CASE("A volume written through PowerCutEnv comes back at its last sync after a power cut") {
  TempDir dir;
  Volume::Options o;
  o.dir = dir.path();
  o.id = 3;
  {
    PowerCutEnv env;
    o.env = &env;
    auto v = Volume::Create(o);
    REQUIRE(v.ok());
    for (uint64_t k = 1; k <= 20; ++k) REQUIRE((*v)->Write(k, 7, RandomBlob(k, 3000 + k)).ok());
    REQUIRE((*v)->Sync().ok());
    REQUIRE((*v)->Delete(5, 7).ok());
    REQUIRE((*v)->Write(21, 7, RandomBlob(21, 100), /*sync=*/true).ok());
    for (uint64_t k = 22; k <= 30; ++k) REQUIRE((*v)->Write(k, 7, RandomBlob(k, 500)).ok());
    std::string buf;
    REQUIRE((*v)->Read(25, 7, &buf).ok());  // readable before the cut
  }
  // Restart on the real disk: the .idx was never synced, so the loader rebuilds it from the
  // synced .dat; the tombstone of 5 was synced by the durable write of 21.
  o.env = nullptr;
  auto v = Volume::Open(o);
  REQUIRE(v.ok());
  std::string buf;
  for (uint64_t k = 1; k <= 20; ++k) {
    auto n = (*v)->Read(k, 7, &buf);
    if (k == 5) {
      CHECK_FALSE(n.ok());
      continue;
    }
    REQUIRE(n.ok());
    CHECK(n->data == RandomBlob(k, 3000 + k));
  }
  auto n21 = (*v)->Read(21, 7, &buf);
  REQUIRE(n21.ok());
  CHECK(n21->data == RandomBlob(21, 100));
  for (uint64_t k = 22; k <= 30; ++k) CHECK_FALSE((*v)->Read(k, 7, &buf).ok());
  // And it takes new writes at its recovered end.
  REQUIRE((*v)->Write(22, 7, RandomBlob(99, 10)).ok());
  auto n22 = (*v)->Read(22, 7, &buf);
  REQUIRE(n22.ok());
  CHECK(n22->data == RandomBlob(99, 10));
}
