#include "filer/http/agfs_body.h"

#include <cerrno>

#include <catch2/catch.hpp>

#include "shared/status.h"

namespace kelp::filer {
namespace {

TEST_CASE("AGFS JSON bodies decode their field", "[agfs]") {
  CHECK(*DecodeWriteBody(R"({"data":"hello"})") == "hello");
  CHECK(*DecodeWriteBody(R"({"data":""})") == "");
  CHECK(DecodeRenameBody(R"({"newPath":"/a/b"})")->path == "/a/b");
  CHECK(*DecodeChmodBody(R"({"mode":420})") == 0644);
  CHECK(*DecodeSymlinkBody(R"({"target":"../x"})") == "../x");
}

TEST_CASE("AGFS JSON bodies: malformed input is EINVAL, never a crash", "[agfs]") {
  for (std::string_view bad : {"", "{", "[]", "null", "\"data\"", R"({"data":5})", R"({"data":null})",
                               "{\"data\":\"\xff\"}", R"({"data":"a"} trailing)"}) {
    INFO(bad);
    CHECK(ErrnoOf(DecodeWriteBody(bad).status()) == EINVAL);
  }
  CHECK(ErrnoOf(DecodeRenameBody(R"({"newPath":""})").status()) == EINVAL);
  CHECK(ErrnoOf(DecodeRenameBody(R"({"newPath":"/a/../b"})").status()) == EINVAL);
  CHECK(ErrnoOf(DecodeRenameBody(R"({"newPath":"relative"})").status()) == EINVAL);
  CHECK(ErrnoOf(DecodeChmodBody(R"({"mode":-1})").status()) == EINVAL);
  CHECK(ErrnoOf(DecodeChmodBody(R"({"mode":4096})").status()) == EINVAL);
  CHECK(ErrnoOf(DecodeChmodBody(R"({"mode":1.5})").status()) == EINVAL);
  CHECK(ErrnoOf(DecodeChmodBody(R"({"mode":"644"})").status()) == EINVAL);
  CHECK(ErrnoOf(DecodeSymlinkBody(R"({"target":""})").status()) == EINVAL);
  CHECK(ErrnoOf(DecodeWriteBody(std::string(kMaxAgfsJsonBody + 1, ' ')).status()) == EFBIG);
}

}  // namespace
}  // namespace kelp::filer
