// The JSON request bodies of the AGFS dialect (/api/v1/...), decoded into what each route
// needs: the bytes of a JSON write ({"data": "..."}), a rename's target ({"newPath": ...}),
// chmod's mode ({"mode": 420}), a symlink's target ({"target": ...}). Malformed or missing
// fields are EINVAL (HTTP 400) with a message naming the field. Pure functions; thread-safe;
// fuzzed by agfs_body_fuzz.cc.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "filer/http/path.h"

namespace kelp::filer {

// Largest JSON body accepted, in bytes.
inline constexpr size_t kMaxAgfsJsonBody = 1 << 20;

absl::StatusOr<std::string> DecodeWriteBody(std::string_view body);
absl::StatusOr<CleanPath> DecodeRenameBody(std::string_view body);
absl::StatusOr<uint32_t> DecodeChmodBody(std::string_view body);
absl::StatusOr<std::string> DecodeSymlinkBody(std::string_view body);

}  // namespace kelp::filer
