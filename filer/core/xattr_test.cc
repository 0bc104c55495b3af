#include "filer/client/limits.h"
#include "filer/core/test_util.h"

using namespace kelp::filer;
using namespace kelp::filer::testing;

TEST_CASE("xattrs: set, get, list, remove with Linux errors") {
  Harness h(KELP_BACKENDS);
  uint64_t f = h.Mkfile(1, "f");
  CHECK(h.fs->GetAttr(f)->no_xattrs());
  REQUIRE(h.fs->SetXattr(f, "user.a", "1", 0).ok());
  CHECK_FALSE(h.fs->GetAttr(f)->no_xattrs());
  REQUIRE(h.fs->SetXattr(f, "user.b", std::string("\0bin\xff", 5), kXattrCreate).ok());
  CHECK(*h.fs->GetXattr(f, "user.a") == "1");
  CHECK(*h.fs->GetXattr(f, "user.b") == std::string("\0bin\xff", 5));
  CHECK(*h.fs->ListXattr(f) == std::vector<std::string>{"user.a", "user.b"});

  CHECK(Err(h.fs->SetXattr(f, "user.a", "2", kXattrCreate)) == EEXIST);
  CHECK(Err(h.fs->SetXattr(f, "user.c", "2", kXattrReplace)) == ENODATA);
  REQUIRE(h.fs->SetXattr(f, "user.a", "2", kXattrReplace).ok());
  CHECK(*h.fs->GetXattr(f, "user.a") == "2");
  CHECK(Err(h.fs->SetXattr(f, "user.a", "2", kXattrCreate | kXattrReplace)) == EINVAL);
  CHECK(Err(h.fs->GetXattr(f, "user.none")) == ENODATA);
  CHECK(Err(h.fs->RemoveXattr(f, "user.none")) == ENODATA);

  CHECK(Err(h.fs->SetXattr(f, "", "v", 0)) == ERANGE);
  CHECK(Err(h.fs->SetXattr(f, std::string(256, 'n'), "v", 0)) == ERANGE);
  CHECK(h.fs->SetXattr(f, std::string(255, 'n'), "v", 0).ok());
  CHECK(h.fs->SetXattr(f, "user.big", std::string(kMaxXattrValueLen, 'v'), 0).ok());
  CHECK(Err(h.fs->SetXattr(f, "user.big", std::string(kMaxXattrValueLen + 1, 'v'), 0)) == E2BIG);
  CHECK(h.fs->SetXattr(f, "user.empty", "", 0).ok());
  CHECK(*h.fs->GetXattr(f, "user.empty") == "");

  REQUIRE(h.fs->RemoveXattr(f, "user.a").ok());
  CHECK(Err(h.fs->GetXattr(f, "user.a")) == ENODATA);
  // The attributes say "no xattrs" exactly when the last one is gone (replacing a value or
  // removing a missing name does not count).
  auto names = h.fs->ListXattr(f);
  REQUIRE(names.ok());
  for (const auto& n : *names) {
    CHECK_FALSE(h.fs->GetAttr(f)->no_xattrs());
    REQUIRE(h.fs->RemoveXattr(f, n).ok());
  }
  CHECK(h.fs->GetAttr(f)->no_xattrs());
  REQUIRE(h.fs->SetXattr(f, "user.a", "1", 0).ok());
  CHECK(Err(h.fs->GetXattr(999, "user.a")) == ENOENT);
  CHECK(Err(h.fs->SetXattr(999, "user.a", "v", 0)) == ENOENT);
  CHECK(Err(h.fs->ListXattr(999)) == ENOENT);

  // Directories carry xattrs too; they go with the inode.
  uint64_t d = h.Mkdir(1, "d");
  REQUIRE(h.fs->SetXattr(d, "user.dir", "x", 0).ok());
  REQUIRE(h.fs->Rmdir(1, "d").ok());
  REQUIRE(h.fs->Unlink(1, "f").ok());
  h.RequireConsistent();
}
