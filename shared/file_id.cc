#include "shared/file_id.h"

#include <bit>
#include <charconv>

#include "shared/strings.h"
#include <fmt/format.h>

namespace kelp {
namespace {

bool ParseHex(std::string_view s, uint64_t* out) {
  if (s.empty() || s.size() > 16) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out, 16);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

std::string FileId::ToString() const {
  // The key in hex, padded to an even number of digits (SeaweedFS's spelling).
  int digits = key == 0 ? 1 : (std::bit_width(key) + 3) / 4;
  return fmt::format("{},{:0{}x}{:08x}", volume_id, key, digits + digits % 2, cookie);
}

absl::StatusOr<FileId> FileId::Parse(std::string_view s) {
  auto bad = [&] { return absl::InvalidArgumentError(kelp::StrCat("malformed file id \"", s, "\"")); };
  size_t comma = s.find(',');
  if (comma == std::string_view::npos || comma == 0) return bad();
  FileId id;
  std::string_view vid = s.substr(0, comma);
  auto [p, ec] = std::from_chars(vid.data(), vid.data() + vid.size(), id.volume_id);
  if (ec != std::errc() || p != vid.data() + vid.size() || id.volume_id == 0) return bad();
  std::string_view rest = s.substr(comma + 1);
  uint64_t delta = 0;
  if (size_t us = rest.find('_'); us != std::string_view::npos) {
    std::string_view d = rest.substr(us + 1);
    auto [p2, ec2] = std::from_chars(d.data(), d.data() + d.size(), delta);
    if (d.empty() || ec2 != std::errc() || p2 != d.data() + d.size()) return bad();
    rest = rest.substr(0, us);
  }
  if (rest.size() <= 8) return bad();
  uint64_t key = 0, cookie = 0;
  if (!ParseHex(rest.substr(0, rest.size() - 8), &key) || !ParseHex(rest.substr(rest.size() - 8), &cookie)) {
    return bad();
  }
  id.key = key + delta;
  id.cookie = static_cast<uint32_t>(cookie);
  return id;
}

}  // namespace kelp
