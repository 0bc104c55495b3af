// TestFiler: a real filer in the test's process for the mount's tests and kelp_fake_mount: the
// namespace core (FilerService) on the in-memory store, served by the metadata RPC transport
// on 127.0.0.1, and a FilerClient connected to it. The mount under test talks to it exactly as
// it talks to `kelp filer`, so what a test shows holds for the real thing.
//
// Volume servers are not part of it: tests give the mount a FakeBlobStore, and Assign answers
// UNAVAILABLE. Fault injection: SetDown(true) stops the server (calls fail UNAVAILABLE, the
// client reconnects once SetDown(false) starts it again on the same port).
//
// Thread-safety: client(), core() and the counters from any thread; SetDown from one.
#pragma once

#include <memory>
#include <string>

#include "filer/client/filer_client.h"
#include "filer/core/filer_service.h"
#include "filer/rpc/filer_rpc_service.h"
#include "filer/store/kv_store.h"
#include "shared/rpc/server.h"

namespace kelp::mount {

class TestFiler {
 public:
  TestFiler();
  ~TestFiler();

  filer::FilerClient* client() { return client_.get(); }
  // Another client of the same filer (a second mount).
  std::unique_ptr<filer::FilerClient> NewClient();
  filer::FilerService* core() { return core_.get(); }
  const std::string& address() const { return address_; }

  void SetDown(bool down);
  bool HasInode(uint64_t ino) { return core_->GetAttr(ino).ok(); }

  // What client() sent: calls by method, in all, and those that asked for a WAL sync.
  uint64_t calls(filer::FilerMethod m) const { return client_->calls(m); }
  uint64_t total_calls() const;
  uint64_t synced_calls() const { return client_->synced_calls(); }

 private:
  class Cluster;
  void StartServer();

  std::unique_ptr<filer::KvStore> kv_;
  std::unique_ptr<Cluster> cluster_;
  std::unique_ptr<filer::FilerService> core_;
  std::unique_ptr<filer::FilerRpcService> rpc_service_;
  std::unique_ptr<rpc::Server> server_;
  int port_ = 0;
  std::string address_;
  std::unique_ptr<filer::FilerClient> client_;
};

}  // namespace kelp::mount
