#include "filer/http/agfs_body.h"

#include <cerrno>

#include <nlohmann/json.hpp>

#include "shared/status.h"

namespace kelp::filer {
namespace {

absl::StatusOr<nlohmann::json> ParseObject(std::string_view body) {
  if (body.size() > kMaxAgfsJsonBody) return PosixError(EFBIG, "JSON body too large");
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return PosixError(EINVAL, "invalid request body");
  return j;
}

// The non-empty string field name of body.
absl::StatusOr<std::string> StringField(std::string_view body, const char* name, bool allow_empty) {
  ASSIGN_OR_RETURN(nlohmann::json j, ParseObject(body));
  auto it = j.find(name);
  if (it == j.end() || !it->is_string() || (!allow_empty && it->get_ref<const std::string&>().empty())) {
    return PosixError(EINVAL, std::string(name) + " is required (a string)");
  }
  return std::move(it->get_ref<std::string&>());
}

}  // namespace

absl::StatusOr<std::string> DecodeWriteBody(std::string_view body) { return StringField(body, "data", true); }

absl::StatusOr<CleanPath> DecodeRenameBody(std::string_view body) {
  ASSIGN_OR_RETURN(std::string to, StringField(body, "newPath", false));
  return CleanHttpPath(to);
}

absl::StatusOr<uint32_t> DecodeChmodBody(std::string_view body) {
  ASSIGN_OR_RETURN(nlohmann::json j, ParseObject(body));
  auto m = j.find("mode");
  if (m == j.end() || !m->is_number_unsigned() || m->get<uint64_t>() > 07777) {
    return PosixError(EINVAL, "mode must be a number in [0, 4095] (0644 is 420)");
  }
  return m->get<uint32_t>();
}

absl::StatusOr<std::string> DecodeSymlinkBody(std::string_view body) { return StringField(body, "target", false); }

}  // namespace kelp::filer
