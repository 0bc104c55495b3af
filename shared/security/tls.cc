#include "shared/security/tls.h"

#include <openssl/err.h>

#include <fstream>
#include <sstream>

#include "shared/rpc/tls.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::security {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, std::string_view what) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(kelp::StrCat("cannot read ", what, " ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  if (ss.str().find("-----BEGIN") == std::string::npos) {
    return absl::InvalidArgumentError(kelp::StrCat(what, " ", path, " is not a PEM file"));
  }
  return ss.str();
}

absl::StatusOr<const TlsFiles*> FilesOf(const SecurityConfig& cfg, std::string_view component) {
  auto it = cfg.grpc.find(component);
  if (it == cfg.grpc.end()) {
    return absl::InvalidArgumentError(kelp::StrCat(cfg.source, ": [grpc] ca is set but [grpc.", component,
                                                   "] has no cert and key"));
  }
  return &it->second;
}

using rpc::OpenSslError;

absl::StatusOr<SslCtxPtr> NewSslCtx(const SecurityConfig& cfg, std::string_view component, bool server) {
  if (!cfg.grpc_tls()) return SslCtxPtr();
  ASSIGN_OR_RETURN(const TlsFiles* files, FilesOf(cfg, component));
  SslCtxPtr ctx(SSL_CTX_new(server ? TLS_server_method() : TLS_client_method()));
  if (!ctx) return absl::InternalError(kelp::StrCat("SSL_CTX_new: ", OpenSslError()));
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_options(ctx.get(), SSL_OP_NO_RENEGOTIATION);  // the transports never renegotiate
  auto fail = [&](std::string_view what, const std::string& path) {
    return absl::InvalidArgumentError(kelp::StrCat(what, " ", path, ": ", OpenSslError()));
  };
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), files->cert.c_str()) != 1) return fail("certificate", files->cert);
  if (SSL_CTX_use_PrivateKey_file(ctx.get(), files->key.c_str(), SSL_FILETYPE_PEM) != 1) {
    return fail("private key", files->key);
  }
  if (SSL_CTX_check_private_key(ctx.get()) != 1) return fail("private key does not match", files->cert);
  if (SSL_CTX_load_verify_locations(ctx.get(), cfg.grpc_ca.c_str(), nullptr) != 1) return fail("CA", cfg.grpc_ca);
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER | (server ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0), nullptr);
  if (server) {
    // Tell clients which CA to pick a certificate for.
    if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(cfg.grpc_ca.c_str())) {
      SSL_CTX_set_client_CA_list(ctx.get(), names);
    }
  }
  return ctx;
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> GrpcServerCredentials(const SecurityConfig& cfg,
                                                                               std::string_view component) {
  if (!cfg.grpc_tls()) return grpc::InsecureServerCredentials();
  ASSIGN_OR_RETURN(const TlsFiles* files, FilesOf(cfg, component));
  grpc::SslServerCredentialsOptions o(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  ASSIGN_OR_RETURN(o.pem_root_certs, ReadPem(cfg.grpc_ca, "CA"));
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  ASSIGN_OR_RETURN(pair.private_key, ReadPem(files->key, "private key"));
  ASSIGN_OR_RETURN(pair.cert_chain, ReadPem(files->cert, "certificate"));
  o.pem_key_cert_pairs.push_back(std::move(pair));
  return grpc::SslServerCredentials(o);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> GrpcChannelCredentials(const SecurityConfig& cfg,
                                                                                 std::string_view component) {
  if (!cfg.grpc_tls()) return grpc::InsecureChannelCredentials();
  ASSIGN_OR_RETURN(const TlsFiles* files, FilesOf(cfg, component));
  grpc::SslCredentialsOptions o;
  ASSIGN_OR_RETURN(o.pem_root_certs, ReadPem(cfg.grpc_ca, "CA"));
  ASSIGN_OR_RETURN(o.pem_private_key, ReadPem(files->key, "private key"));
  ASSIGN_OR_RETURN(o.pem_cert_chain, ReadPem(files->cert, "certificate"));
  return grpc::SslCredentials(o);
}

absl::StatusOr<SslCtxPtr> NewServerSslCtx(const SecurityConfig& cfg, std::string_view component) {
  return NewSslCtx(cfg, component, true);
}

absl::StatusOr<SslCtxPtr> NewClientSslCtx(const SecurityConfig& cfg, std::string_view component) {
  return NewSslCtx(cfg, component, false);
}

absl::Status ExpectPeerHost(SSL* ssl, std::string_view host) { return rpc::ExpectPeerHost(ssl, host); }

}  // namespace kelp::security
