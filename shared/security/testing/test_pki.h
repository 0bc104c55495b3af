// A throwaway PKI for tests (made with OpenSSL's API, no openssl binary needed): a CA,
// certificates for the filer, volume and client components signed by it (subject alternative
// names 127.0.0.1 and localhost), and a rogue CA with a client certificate of its own, to
// show that only the real CA's certificates get in. Plus a security.toml naming them.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace kelp::security::testing {

struct TestPki {
  std::string dir;
  std::string ca_cert;
  // <dir>/<name>.crt and .key for "filer", "volume", "client", and "rogue" (signed by
  // <dir>/rogue_ca.crt, not by ca_cert).
  std::string Cert(const std::string& name) const { return dir + "/" + name + ".crt"; }
  std::string Key(const std::string& name) const { return dir + "/" + name + ".key"; }
};

// Writes the PKI into dir (which must exist).
absl::StatusOr<TestPki> MakeTestPki(const std::string& dir);

// The text of a security.toml: [grpc] with the PKI's CA and components when pki is given,
// and the JWT sections whose keys are non-empty.
struct TomlOptions {
  const TestPki* pki = nullptr;
  std::string volume_write_key, volume_read_key, filer_write_key, filer_read_key;
  int expires_after_seconds = 10;
};
std::string SecurityToml(const TomlOptions& o);

}  // namespace kelp::security::testing
