#include "shared/security/jwt.h"

#include <jwt.h>

#include <cerrno>
#include <cstdlib>
#include <memory>

#include "shared/http/http_parser.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::security {
namespace {

struct JwtFree {
  void operator()(jwt_t* j) const { jwt_free(j); }
};
using JwtPtr = std::unique_ptr<jwt_t, JwtFree>;

constexpr size_t kMaxTokenBytes = 4096;

absl::Status Unauthenticated(std::string_view why) { return absl::UnauthenticatedError(std::string(why)); }

const unsigned char* KeyBytes(const JwtKey& key) { return reinterpret_cast<const unsigned char*>(key.key.data()); }

std::string Encode(jwt_t* j) {
  char* s = jwt_encode_str(j);
  if (!s) return {};
  std::string out(s);
  free(s);  // libjwt allocates with malloc
  return out;
}

// Decodes and checks signature, algorithm and expiry; returns the token.
absl::StatusOr<JwtPtr> Decode(const JwtKey& key, std::string_view token, time_t now) {
  if (!key.enabled()) return absl::FailedPreconditionError("no signing key configured");
  if (token.empty()) return Unauthenticated("missing token (Authorization: Bearer ...)");
  if (token.size() > kMaxTokenBytes) return Unauthenticated("token too long");
  std::string t(token);  // libjwt wants a NUL-terminated string
  jwt_t* raw = nullptr;
  if (jwt_decode(&raw, t.c_str(), KeyBytes(key), static_cast<int>(key.key.size())) != 0 || raw == nullptr) {
    return Unauthenticated("invalid token");
  }
  JwtPtr j(raw);
  // libjwt verifies the signature of a signed token; "alg": "none" would skip it.
  if (jwt_get_alg(j.get()) != JWT_ALG_HS256) return Unauthenticated("token is not HS256");
  errno = 0;
  long exp = jwt_get_grant_int(j.get(), "exp");
  if (errno == 0 && exp <= now) return Unauthenticated("token expired");
  if (errno != 0 && errno != ENOENT) return Unauthenticated("invalid token expiry");
  return j;
}

JwtPtr NewToken(const JwtKey& key, int expires_after_seconds, time_t now) {
  jwt_t* raw = nullptr;
  if (jwt_new(&raw) != 0) return nullptr;
  JwtPtr j(raw);
  if (jwt_set_alg(j.get(), JWT_ALG_HS256, KeyBytes(key), static_cast<int>(key.key.size())) != 0) return nullptr;
  if (expires_after_seconds > 0) jwt_add_grant_int(j.get(), "exp", static_cast<long>(now + expires_after_seconds));
  return j;
}

}  // namespace

std::string SignFileIdToken(const JwtKey& key, const FileId& fid, uint32_t count, time_t now) {
  if (!key.enabled()) return {};
  JwtPtr j = NewToken(key, key.expires_after_seconds, now);
  if (!j) return {};
  jwt_add_grant(j.get(), "fid", fid.ToString().c_str());
  if (count > 1) jwt_add_grant_int(j.get(), "count", count);
  return Encode(j.get());
}

absl::Status VerifyFileIdToken(const JwtKey& key, std::string_view token, const FileId& fid, time_t now) {
  auto j = Decode(key, token, now);
  if (!j.ok()) return j.status();
  const char* claim = jwt_get_grant(j->get(), "fid");
  if (!claim) return Unauthenticated("token names no file id");
  auto base = FileId::Parse(claim);
  if (!base.ok()) return Unauthenticated("token names a malformed file id");
  errno = 0;
  long count = jwt_get_grant_int(j->get(), "count");
  if (errno != 0) count = 1;
  if (count < 1) return Unauthenticated("token covers no file id");
  if (base->volume_id != fid.volume_id || base->cookie != fid.cookie || fid.key < base->key ||
      fid.key - base->key >= static_cast<uint64_t>(count)) {
    return Unauthenticated("token is for another file id");
  }
  return absl::OkStatus();
}

std::string SignFilerToken(const JwtKey& key, int expires_after_seconds, time_t now) {
  if (!key.enabled()) return {};
  JwtPtr j = NewToken(key, expires_after_seconds, now);
  return j ? Encode(j.get()) : std::string();
}

absl::Status VerifyFilerToken(const JwtKey& key, std::string_view token, time_t now) {
  auto j = Decode(key, token, now);
  return j.ok() ? absl::OkStatus() : j.status();
}

std::string TokenOf(std::string_view authorization, const std::optional<std::string>& jwt_query) {
  if (authorization.size() > 7 && http::EqualsIgnoreCase(authorization.substr(0, 7), "Bearer ")) {
    std::string_view t = authorization.substr(7);
    while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
    return std::string(t);
  }
  return jwt_query.value_or("");
}

}  // namespace kelp::security
