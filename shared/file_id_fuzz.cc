// libFuzzer target: FileId::Parse. Property: what parses prints back to a spelling that
// parses to the same id (siblings "<fid>_N" print as their own key).
#include <cstdint>
#include <string_view>

#include "shared/file_id.h"
#include "shared/testing/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto id = kelp::FileId::Parse(in);
  if (id.ok()) {
    FUZZ_CHECK(id->volume_id != 0);
    auto again = kelp::FileId::Parse(id->ToString());
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(*again == *id);
  }
  return 0;
}
