// libFuzzer target: the AGFS JSON request bodies (agfs_body.h) and the path check every
// HTTP path goes through (path.h). Properties: no crash; a clean path is absolute, has no
// empty, "." or ".." component and cleans to itself.
#include <cstdint>
#include <string_view>

#include "filer/http/agfs_body.h"
#include "filer/http/path.h"
#include "shared/testing/fuzz_util.h"

using namespace kelp::filer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  (void)DecodeWriteBody(in);
  (void)DecodeChmodBody(in);
  (void)DecodeSymlinkBody(in);
  (void)DecodeRenameBody(in);
  auto p = CleanHttpPath(in);
  if (p.ok()) {
    FUZZ_CHECK(!p->path.empty() && p->path[0] == '/');
    FUZZ_CHECK(p->path.find("//") == std::string::npos);
    FUZZ_CHECK(p->path.find('\0') == std::string::npos);
    FUZZ_CHECK(p->path.find("/../") == std::string::npos && p->path.find("/./") == std::string::npos);
    auto again = CleanHttpPath(p->path);
    FUZZ_CHECK(again.ok() && again->path == p->path);
    FUZZ_CHECK(p->is_root() || !p->name().empty());
  }
  return 0;
}
