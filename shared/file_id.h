// A file id names one blob: "<volumeId>,<keyHex><cookieHex8>" as SeaweedFS spells it
// ("3,01637037d6": volume 3, key 0x01, cookie 0x637037d6). The key hex has no leading zero
// bytes; the cookie is always 8 hex digits and stops guessing of neighbouring ids. An
// assignment of count N returns one fid; its siblings are "<fid>_1" ... "<fid>_{N-1}" (key+i).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace kelp {

struct FileId {
  uint32_t volume_id = 0;
  uint64_t key = 0;
  uint32_t cookie = 0;

  std::string ToString() const;
  static absl::StatusOr<FileId> Parse(std::string_view s);
  bool operator==(const FileId&) const = default;
};

}  // namespace kelp
