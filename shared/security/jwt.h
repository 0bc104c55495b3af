// JSON Web Tokens as SeaweedFS uses them, HS256 only, signed and checked with Debian's libjwt:
//
//  - file id tokens: claims {"fid": "<volumeId>,<keyHex><cookieHex>", "exp": ...} plus Kelp's
//    "count" (an assignment of count consecutive keys: the token covers fid's key .. key +
//    count - 1 with fid's cookie; absent = 1). The filer signs one per Assign with
//    [jwt.signing] (writes and deletes) and readers sign their own with [jwt.signing.read];
//    volume servers check them.
//  - filer tokens: claims {"exp": ...} only, for the filer's HTTP API ([jwt.filer_signing],
//    [jwt.filer_signing.read]); users make them with `kelp security.token`.
//
// A token travels as "Authorization: Bearer <token>" or, as SeaweedFS also accepts, ?jwt=.
// Every check failure is UNAUTHENTICATED (HTTP 401) with a message that never contains the
// token or the key. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "shared/file_id.h"
#include "shared/security/security_config.h"

namespace kelp::security {

// Signs a token for fid and the count - 1 siblings after it; expiry from key, counted from now.
std::string SignFileIdToken(const JwtKey& key, const FileId& fid, uint32_t count, time_t now = time(nullptr));
// OK if token is a valid, unexpired token of key that covers fid.
absl::Status VerifyFileIdToken(const JwtKey& key, std::string_view token, const FileId& fid,
                               time_t now = time(nullptr));

// A filer API token; expires_after_seconds 0 = no expiry.
std::string SignFilerToken(const JwtKey& key, int expires_after_seconds, time_t now = time(nullptr));
absl::Status VerifyFilerToken(const JwtKey& key, std::string_view token, time_t now = time(nullptr));

// The token of a request: the Authorization header's Bearer value, else ?jwt=; "" when none.
std::string TokenOf(std::string_view authorization_header, const std::optional<std::string>& jwt_query);

}  // namespace kelp::security
