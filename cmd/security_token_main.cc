// kelp security.token: prints a token for the filer's HTTP API, signed with the
// [jwt.filer_signing] key (or [jwt.filer_signing.read] with -read) of a security.toml, for
// curl and scripts: curl -H "Authorization: Bearer $(kelp security.token -security=s.toml) ...".
#include <cstdio>

#include "cmd/commands.h"
#include "shared/flags.h"
#include "shared/log.h"
#include "shared/security/jwt.h"
#include "shared/security/security_config.h"

namespace kelp {

int SecurityTokenMain(int argc, char** argv) {
  std::string security_file;
  bool read = false;
  int expires = 3600;
  FlagSet flags("security.token", "kelp security.token -security=FILE [-read] [-expiresAfterSec=3600]",
                "Prints a token for the filer's HTTP API (\"Authorization: Bearer <token>\"), signed with the\n"
                "[jwt.filer_signing] key of -security (with -read: [jwt.filer_signing.read]). docs/security.md.");
  flags.Add("security", &security_file, "security.toml holding the key (required)");
  flags.Add("read", &read, "sign with the read key: the token allows GET and HEAD only");
  flags.Add("expiresAfterSec", &expires, "lifetime of the token, in seconds; 0 = it never expires");
  flags.ParseOrExit(argc, argv);
  if (security_file.empty() || expires < 0) {
    std::fprintf(stderr, "kelp security.token: -security is required and -expiresAfterSec >= 0 (see -h)\n");
    return 2;
  }
  auto cfg = security::LoadSecurityConfig(security_file);
  if (!cfg.ok()) {
    std::fprintf(stderr, "kelp security.token: %s\n", std::string(cfg.status().message()).c_str());
    return 1;
  }
  const security::JwtKey& key = read ? cfg->filer_read : cfg->filer_write;
  if (!key.enabled()) {
    std::fprintf(stderr, "kelp security.token: %s has no [jwt.filer_signing%s] key\n", security_file.c_str(),
                 read ? ".read" : "");
    return 1;
  }
  std::printf("%s\n", security::SignFilerToken(key, expires).c_str());
  return 0;
}

}  // namespace kelp
