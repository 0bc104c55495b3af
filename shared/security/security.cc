#include "shared/security/security.h"


#include "absl/base/thread_annotations.h"
#include "shared/log.h"
#include "shared/mutex.h"
#include "shared/status.h"
#include "shared/security/tls.h"

namespace kelp::security {
namespace {

struct State {
  std::shared_ptr<const SecurityConfig> config = std::make_shared<SecurityConfig>();
  std::shared_ptr<grpc::ChannelCredentials> channel;
  std::shared_ptr<SSL_CTX> client_ssl;  // null without [grpc] ca
};

Mutex g_mu;
State& GlobalState() ABSL_EXCLUSIVE_LOCKS_REQUIRED(g_mu) {
  static State* s = new State;  // never destroyed: read by threads until exit
  return *s;
}

}  // namespace

absl::Status Install(SecurityConfig config, std::string_view client_component) {
  ASSIGN_OR_RETURN(auto channel, GrpcChannelCredentials(config, client_component));
  // Made now: a file that cannot be used fails the start, not the first connection.
  ASSIGN_OR_RETURN(SslCtxPtr client_ssl, NewClientSslCtx(config, client_component));
  MutexLock l(g_mu);
  State& s = GlobalState();
  s.config = std::make_shared<const SecurityConfig>(std::move(config));
  s.channel = std::move(channel);
  s.client_ssl = std::move(client_ssl);
  return absl::OkStatus();
}

absl::Status InstallFromFile(const std::string& path, std::string_view client_component) {
  ASSIGN_OR_RETURN(SecurityConfig cfg, LoadSecurityConfig(path));
  if (!path.empty()) spdlog::info("security: {} ({})", path, cfg.ToString());
  return Install(std::move(cfg), client_component);
}

std::shared_ptr<const SecurityConfig> Current() {
  MutexLock l(g_mu);
  return GlobalState().config;
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials() {
  MutexLock l(g_mu);
  State& s = GlobalState();
  if (!s.channel) s.channel = grpc::InsecureChannelCredentials();
  return s.channel;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(std::string_view component) {
  return GrpcServerCredentials(*Current(), component);
}

std::shared_ptr<SSL_CTX> ClientSslCtx() {
  MutexLock l(g_mu);
  return GlobalState().client_ssl;
}

absl::StatusOr<std::shared_ptr<SSL_CTX>> ServerSslCtx(std::string_view component) {
  ASSIGN_OR_RETURN(SslCtxPtr ctx, NewServerSslCtx(*Current(), component));
  return std::shared_ptr<SSL_CTX>(std::move(ctx));
}

void AddSecurityFlag(FlagSet& flags, std::string* path) {
  flags.Add("security", path,
            "security.toml (SeaweedFS layout: JWT keys, gRPC mutual TLS; docs/security.md); empty = none");
}

}  // namespace kelp::security
