#include "filer/http/path.h"

#include <catch2/catch.hpp>

#include "shared/status.h"

using namespace kelp;
using namespace kelp::filer;

namespace {

int Err(std::string_view raw) { return ErrnoOf(CleanHttpPath(raw).status()); }

}  // namespace

TEST_CASE("clean paths pass and split into dir and name") {
  auto p = CleanHttpPath("/a/b/c.txt");
  REQUIRE(p.ok());
  CHECK(p->path == "/a/b/c.txt");
  CHECK_FALSE(p->trailing_slash);
  CHECK(p->dir() == "/a/b");
  CHECK(p->name() == "c.txt");

  auto top = CleanHttpPath("/x");
  REQUIRE(top.ok());
  CHECK(top->dir() == "/");
  CHECK(top->name() == "x");

  auto root = CleanHttpPath("/");
  REQUIRE(root.ok());
  CHECK(root->is_root());
  CHECK(root->name().empty());
  CHECK(root->dir() == "/");
  CHECK(root->Child("f").path == "/f");

  auto dir = CleanHttpPath("/a/b/");
  REQUIRE(dir.ok());
  CHECK(dir->path == "/a/b");
  CHECK(dir->trailing_slash);
  CHECK(dir->Child("c").path == "/a/b/c");

  // Names may hold anything but '/' and NUL: spaces, dots inside, UTF-8, '%'.
  CHECK(CleanHttpPath("/a b/.hidden/..x/x../€/100%").ok());
  CHECK(CleanHttpPath("/" + std::string(255, 'n')).ok());
}

TEST_CASE("paths that could leave the tree or smuggle a name are refused") {
  CHECK(Err("") == EINVAL);
  CHECK(Err("a/b") == EINVAL);
  CHECK(Err("../etc/passwd") == EINVAL);
  CHECK(Err("/..") == EINVAL);
  CHECK(Err("/a/../../etc") == EINVAL);
  CHECK(Err("/a/..") == EINVAL);
  CHECK(Err("/a/./b") == EINVAL);
  CHECK(Err("/.") == EINVAL);
  CHECK(Err("//a") == EINVAL);
  CHECK(Err("/a//b") == EINVAL);
  CHECK(Err("/a/b//") == EINVAL);
  CHECK(Err(std::string_view("/a\0b", 4)) == EINVAL);
  CHECK(Err(std::string_view("/\0", 2)) == EINVAL);
  CHECK(Err("/" + std::string(256, 'n')) == ENAMETOOLONG);
  CHECK(Err("/a/" + std::string(256, 'n') + "/b") == ENAMETOOLONG);
  std::string deep;
  while (deep.size() <= kMaxHttpPathLen) deep += "/abcdefgh";
  CHECK(Err(deep) == ENAMETOOLONG);
  // Every refusal is a 400.
  CHECK(HttpStatusOf(CleanHttpPath("/a/../b").status()) == 400);
  CHECK(HttpStatusOf(CleanHttpPath("/" + std::string(300, 'x')).status()) == 400);
}
