// Access control of the filer's HTTP port (docs/security.md). With [jwt.filer_signing] in
// security.toml, every request that changes something needs a token signed with that key
// ("Authorization: Bearer <token>" or ?jwt=; `kelp security.token` makes one): PUT, POST,
// DELETE of files, and /dir/assign (which hands out volume write tokens). With
// [jwt.filer_signing.read], reads need one signed with the read key: GET and HEAD of files
// and listings, /dir/lookup, /dir/status. /metrics, /status and /api/v1/health stay open
// for monitoring. A request without a valid token gets 401 and changes nothing.
// Thread-safe.
#pragma once

#include <memory>

#include "absl/status/status.h"
#include "shared/http/http_server.h"
#include "shared/security/security_config.h"

namespace kelp::filer {

class FilerHttpAuth {
 public:
  explicit FilerHttpAuth(std::shared_ptr<const security::SecurityConfig> config);

  // OK when req may go on; Unauthenticated (HTTP 401) when it needs a token it lacks.
  absl::Status Check(const http::Request& req) const;
  // For the upgrade to the metadata transport (shared/rpc), which reads and writes: a token
  // of the write key when there is one.
  absl::Status CheckUpgrade(const http::Request& req) const;

  // Whether req is one that writes (needs the write key), as opposed to a read.
  static bool IsWrite(const http::Request& req);
  // Paths open to anyone.
  static bool IsOpen(const http::Request& req);

 private:
  const std::shared_ptr<const security::SecurityConfig> config_;
};

}  // namespace kelp::filer
