// security.toml, in SeaweedFS's layout (docs/security.md):
//
//   [jwt.signing]               # volume server writes and deletes
//   key = "..."                 # HS256 secret; empty or absent = off
//   expires_after_seconds = 10  # lifetime of a token the filer hands out at assign
//   [jwt.signing.read]          # volume server reads
//   key = "..."
//   [jwt.filer_signing]         # the filer's HTTP API: writes (PUT, POST, DELETE, /dir/assign)
//   key = "..."
//   [jwt.filer_signing.read]    # the filer's HTTP API: reads (GET, HEAD, /dir/lookup)
//   key = "..."
//   [grpc]
//   ca = "/etc/kelp/ca.crt"     # with it, every gRPC connection is mutual TLS
//   [grpc.filer]                # cert + key of each component: filer, volume, client
//   cert = "/etc/kelp/filer.crt"
//   key = "/etc/kelp/filer.key"
//
// Secrets are read from this file only (never from flags), and never logged: ToString()
// names what is on, not the keys.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace kelp::security {

// One kind of JWT. An empty key turns it off.
struct JwtKey {
  std::string key;
  // Lifetime of tokens signed with this key, in seconds; 0 = tokens without expiry.
  // Default: 10 (SeaweedFS's).
  int expires_after_seconds = 10;
  bool enabled() const { return !key.empty(); }
};

// A component's certificate and private key (PEM file paths).
struct TlsFiles {
  std::string cert;
  std::string key;
};

// The gRPC components that have a [grpc.<name>] section. Servers present their own
// certificate and also dial with it; tools (mount, benchmark, filer.fsck) are "client".
inline constexpr std::string_view kFilerComponent = "filer";
inline constexpr std::string_view kVolumeComponent = "volume";
inline constexpr std::string_view kClientComponent = "client";

struct SecurityConfig {
  std::string source;   // the file it came from; "" = no file, everything off
  JwtKey volume_write;  // [jwt.signing]
  JwtKey volume_read;   // [jwt.signing.read]
  JwtKey filer_write;   // [jwt.filer_signing]
  JwtKey filer_read;    // [jwt.filer_signing.read]
  std::string grpc_ca;  // [grpc] ca; "" = gRPC without TLS
  std::map<std::string, TlsFiles, std::less<>> grpc;  // [grpc.<component>]

  bool grpc_tls() const { return !grpc_ca.empty(); }
  // What is on, for a startup log line: "jwt: volume writes, filer reads; grpc: mTLS".
  std::string ToString() const;
};

// Shortest accepted key, in bytes: a shorter HS256 secret can be guessed.
inline constexpr size_t kMinKeyBytes = 16;

// Parses the TOML text of a security.toml; source names it in errors. InvalidArgument for
// bad TOML, unknown sections or keys, a key shorter than kMinKeyBytes, a [grpc] ca without
// any component, or a component with cert but no key.
absl::StatusOr<SecurityConfig> ParseSecurityConfig(std::string_view toml, std::string_view source);

// Reads and parses path; "" = no security (everything off).
absl::StatusOr<SecurityConfig> LoadSecurityConfig(const std::string& path);

}  // namespace kelp::security
