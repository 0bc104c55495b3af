#include "filer/http/auth.h"

#include "shared/security/jwt.h"

namespace kelp::filer {

FilerHttpAuth::FilerHttpAuth(std::shared_ptr<const security::SecurityConfig> config) : config_(std::move(config)) {}

absl::Status FilerHttpAuth::CheckUpgrade(const http::Request& req) const {
  if (!config_->filer_write.enabled()) return absl::OkStatus();
  return security::VerifyFilerToken(config_->filer_write,
                                    security::TokenOf(req.header("Authorization"), req.query("jwt")));
}

bool FilerHttpAuth::IsOpen(const http::Request& req) {
  const std::string& p = req.path();
  return p == "/metrics" || p == "/status" || p == "/api/v1/health";
}

bool FilerHttpAuth::IsWrite(const http::Request& req) {
  if (req.path() == "/dir/assign") return true;
  const std::string& m = req.method();
  return m != "GET" && m != "HEAD";
}

absl::Status FilerHttpAuth::Check(const http::Request& req) const {
  const security::JwtKey& key = IsWrite(req) ? config_->filer_write : config_->filer_read;
  if (!key.enabled() || IsOpen(req)) return absl::OkStatus();
  return security::VerifyFilerToken(key, security::TokenOf(req.header("Authorization"), req.query("jwt")));
}

}  // namespace kelp::filer
