#include "volume/store/store.h"

#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>

#include "shared/status.h"
#include "volume/store/test_util.h"

using namespace kelp::volume;
using kelp::volume::testing::TempDir;

TEST_CASE("volume file names parse with and without a collection") {
  std::string c;
  uint32_t id;
  REQUIRE(ParseVolumeFileBase("12", &c, &id));
  CHECK(c.empty());
  CHECK(id == 12);
  REQUIRE(ParseVolumeFileBase("my_pics_3", &c, &id));
  CHECK(c == "my_pics");
  CHECK(id == 3);
  CHECK_FALSE(ParseVolumeFileBase("pics", &c, &id));
  CHECK_FALSE(ParseVolumeFileBase("_3", &c, &id));
  CHECK_FALSE(ParseVolumeFileBase("0", &c, &id));
  CHECK_FALSE(ParseVolumeFileBase("x_", &c, &id));
}

TEST_CASE("store allocates, reloads, lists and deletes volumes") {
  TempDir dir;
  {
    Store store({dir.path(), 3, 1 << 20, nullptr});
    REQUIRE(store.Load().ok());
    REQUIRE(store.Allocate(1, "", "000").ok());
    REQUIRE(store.Allocate(2, "pics", "001").ok());
    REQUIRE(store.Allocate(2, "pics", "001").ok());  // idempotent
    CHECK(kelp::ErrnoOf(store.Allocate(2, "docs", "000").status()) == EEXIST);
    REQUIRE(store.Allocate(3, "", "000").ok());
    CHECK(kelp::ErrnoOf(store.Allocate(4, "", "000").status()) == ENOSPC);  // -max reached
    REQUIRE(store.Get(2)->Write(5, 6, "hello").ok());
    REQUIRE(store.Delete(3).ok());
    CHECK(store.Get(3) == nullptr);
    CHECK_FALSE(std::filesystem::exists(dir.file("3.dat")));
    CHECK(kelp::ErrnoOf(store.Delete(3)) == ENOENT);
  }
  std::ofstream(dir.file("notes.txt")) << "not a volume";
  Store store({dir.path(), 3, 1 << 20, nullptr});
  REQUIRE(store.Load().ok());
  auto list = store.List();
  REQUIRE(list.size() == 2);
  CHECK(list[0]->id() == 1);
  CHECK(list[1]->id() == 2);
  CHECK(list[1]->collection() == "pics");
  CHECK(list[1]->replication() == "001");
  std::string buf;
  auto n = store.Get(2)->Read(5, 6, &buf);
  REQUIRE(n.ok());
  CHECK(n->data == "hello");
}

TEST_CASE("the coordinator's size limit only ever lowers the configured one") {
  TempDir dir;
  Store store({dir.path(), 3, 1 << 20, nullptr});
  REQUIRE(store.Load().ok());
  auto v = store.Allocate(1, "", "000");
  REQUIRE(v.ok());
  store.SetVolumeSizeLimit(2 << 20);
  CHECK(store.volume_size_limit() == (1 << 20));
  store.SetVolumeSizeLimit(100);
  CHECK(store.volume_size_limit() == 100);
  REQUIRE((*v)->Write(1, 1, std::string(200, 'x')).ok());
  CHECK((*v)->read_only());
  auto v2 = store.Allocate(2, "", "000");
  REQUIRE(v2.ok());
  REQUIRE((*v2)->Write(1, 1, std::string(200, 'x')).ok());
  CHECK((*v2)->read_only());  // new volumes get the lowered limit
}
