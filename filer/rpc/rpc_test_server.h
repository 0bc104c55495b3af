// Test helpers for the filer's metadata transport: a FilerService behind FilerRpcService on a
// real rpc::Server on 127.0.0.1, with a FilerClient of it (filer/rpc/filer_rpc_service_test.cc,
// filer/client/filer_client_test.cc).
#pragma once

#include <sys/stat.h>

#include <memory>
#include <string>

#include <catch2/catch.hpp>

#include "filer/client/filer_client.h"
#include "filer/core/filer_service.h"
#include "filer/rpc/filer_rpc_service.h"
#include "shared/rpc/server.h"

namespace kelp::filer::testing {

struct Server {
  explicit Server(FilerService* core) : svc(core) {
    Up();
    client = std::make_unique<FilerClient>("127.0.0.1:" + std::to_string(port));
  }
  ~Server() {
    svc.Shutdown();
    if (server) server->Stop();
  }
  // Starts serving (again, on the same port).
  void Up() {
    kelp::rpc::Server::Options o;
    o.loop_threads = 1;
    o.metric_prefix = "kelp_filer_rpc";
    server = std::make_unique<kelp::rpc::Server>(o, svc.service());
    REQUIRE(server->Start().ok());
    auto p = server->Listen("127.0.0.1", port);
    REQUIRE(p.ok());
    port = *p;
  }
  void Down() {
    server->Stop();
    server.reset();
  }
  FilerRpcService svc;
  int port = 0;
  std::unique_ptr<kelp::rpc::Server> server;
  std::unique_ptr<FilerClient> client;
};

inline CreateRequest File(uint64_t parent, const std::string& name) {
  CreateRequest r;
  r.set_parent(parent);
  r.set_name(name);
  r.set_mode(S_IFREG | 0644);
  r.set_exclusive(true);
  return r;
}

}  // namespace kelp::filer::testing
