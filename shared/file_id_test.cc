#include "shared/file_id.h"

#include <catch2/catch.hpp>

using kelp::FileId;

TEST_CASE("file id parses SeaweedFS spelling") {
  auto id = FileId::Parse("3,01637037d6");
  REQUIRE(id.ok());
  CHECK(id->volume_id == 3);
  CHECK(id->key == 0x01);
  CHECK(id->cookie == 0x637037d6);
  CHECK(id->ToString() == "3,01637037d6");
  // The key takes an even number of hex digits.
  CHECK((FileId{1, 0, 0}).ToString() == "1,0000000000");
  CHECK((FileId{1, 0xabc, 1}).ToString() == "1,0abc00000001");
  CHECK((FileId{7, 0x1234, 0xff}).ToString() == "7,1234000000ff");
  CHECK((FileId{7, ~0ULL, 0}).ToString() == "7,ffffffffffffffff00000000");
}

TEST_CASE("file id round trips large keys and sibling suffixes") {
  FileId f{42, 0x123456789abcdefULL, 0xdeadbeef};
  auto back = FileId::Parse(f.ToString());
  REQUIRE(back.ok());
  CHECK(*back == f);
  auto sib = FileId::Parse(f.ToString() + "_3");
  REQUIRE(sib.ok());
  CHECK(sib->key == f.key + 3);
}

TEST_CASE("malformed file ids are rejected") {
  for (const char* bad : {"", "3", ",01637037d6", "3,", "3,637037d6", "x,01637037d6", "3,01637037dz",
                          "0,01637037d6", "3,01637037d6_", "3,01637037d6_x", "3,1111111111111111111637037d6",
                          "-1,01637037d6"}) {
    INFO(bad);
    CHECK_FALSE(FileId::Parse(bad).ok());
  }
}
