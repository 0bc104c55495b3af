// The security of this process: the security.toml that -security named, loaded once by the
// command's main before any server or client starts, and read by everything that signs or
// checks a token or dials another Kelp server. Without -security everything is off, as
// before (plaintext gRPC, no tokens).
//
//   RETURN_IF_ERROR(security::InstallFromFile(path, security::kVolumeComponent));
//   auto cfg = security::Current();           // shared_ptr<const SecurityConfig>
//   auto creds = security::ChannelCredentials();
//
// Threads: Install* before starting threads (tests may install again between cases); the
// getters from any thread.
#pragma once

#include <openssl/ssl.h>

#include <memory>
#include <string>
#include <string_view>

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include "absl/status/statusor.h"
#include "shared/flags.h"
#include "shared/security/security_config.h"

namespace kelp::security {

// Loads path ("" = nothing) and installs it; client_component is the [grpc.<name>] this
// process dials other servers with (a server's own; "client" for tools). Fails with a clear
// message when the file is malformed or a certificate it names cannot be read.
absl::Status InstallFromFile(const std::string& path, std::string_view client_component);
absl::Status Install(SecurityConfig config, std::string_view client_component);

std::shared_ptr<const SecurityConfig> Current();

// Credentials for dialling a Kelp gRPC server (insecure without [grpc] ca).
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials();
// Credentials for serving gRPC as component.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(std::string_view component);

// The metadata transport's TLS (shared/rpc): the client side for this process's client
// component, made at Install; null without [grpc] ca (plaintext).
std::shared_ptr<SSL_CTX> ClientSslCtx();
// The server side for component ("filer"); null without [grpc] ca.
absl::StatusOr<std::shared_ptr<SSL_CTX>> ServerSslCtx(std::string_view component);

// Registers -security=FILE with the same help everywhere.
void AddSecurityFlag(FlagSet& flags, std::string* path);

}  // namespace kelp::security
