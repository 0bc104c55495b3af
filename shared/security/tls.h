// Mutual TLS from security.toml's [grpc] sections, with gRPC's own TLS credentials and, for
// plain TCP transports (the metadata transport's frames), OpenSSL SSL_CTXs set up the same
// way: each side presents its component's certificate, and accepts only a peer whose
// certificate the [grpc] ca signed. Clients also check that the server's certificate names
// the host they dialled (a DNS or IP subject alternative name).
//
// With no [grpc] ca everything here hands out plaintext (insecure gRPC credentials; a null
// SSL_CTX). Files are read when called: call once at start and keep the result.
// Thread-safe.
#pragma once

#include <openssl/ssl.h>

#include <memory>
#include <string_view>

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include "absl/status/statusor.h"
#include "shared/security/security_config.h"

namespace kelp::security {

// Server credentials for component ("filer", "volume"): TLS 1.2+, client certificate required
// and verified against the CA. InvalidArgument if the component has no [grpc.<component>].
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> GrpcServerCredentials(const SecurityConfig& cfg,
                                                                               std::string_view component);
// Channel credentials presenting component's certificate, trusting only the CA.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> GrpcChannelCredentials(const SecurityConfig& cfg,
                                                                                 std::string_view component);

struct SslCtxFree {
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
};
using SslCtxPtr = std::unique_ptr<SSL_CTX, SslCtxFree>;

// An SSL_CTX for a TCP server (SSL_accept side) or client (SSL_connect side) of component:
// its certificate and key, the CA as the only trust root, peer verification required (a
// client without a certificate the CA signed fails the handshake), TLS 1.2 at least.
// nullptr (and OK) when the config has no [grpc] ca. A client sets the host it expects with
// SSL_set1_host (see ExpectPeerHost).
absl::StatusOr<SslCtxPtr> NewServerSslCtx(const SecurityConfig& cfg, std::string_view component);
absl::StatusOr<SslCtxPtr> NewClientSslCtx(const SecurityConfig& cfg, std::string_view component);

// Makes a client SSL check that the server's certificate names host (a DNS name or an IP).
absl::Status ExpectPeerHost(SSL* ssl, std::string_view host);

}  // namespace kelp::security
