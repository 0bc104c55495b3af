// The gRPC control plane, heartbeats to a fake filer, and the background vacuum.
#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>

#include "proto/volume.grpc.pb.h"
#include "shared/file_id.h"
#include "volume/core/heartbeat.h"
#include "volume/core/vacuum.h"
#include "volume/server/test_server.h"

using namespace kelp::volume;
using namespace kelp::volume::testing;
using kelp::FileId;

namespace {

std::unique_ptr<VolumeService::Stub> Stub(const VolumeServer& s) {
  return VolumeService::NewStub(
      grpc::CreateChannel(s.grpc_address(), grpc::InsecureChannelCredentials()));
}

}  // namespace

TEST_CASE("gRPC: allocate, status, batch delete, vacuum, read-only, delete volume") {
  TestServer t;
  auto stub = Stub(*t.server);

  AllocateVolumeRequest alloc;
  alloc.set_volume_id(5);
  alloc.set_collection("docs");
  alloc.set_replication("000");
  AllocateVolumeResponse alloc_resp;
  {
    grpc::ClientContext ctx;
    REQUIRE(stub->AllocateVolume(&ctx, alloc, &alloc_resp).ok());
  }
  {
    grpc::ClientContext ctx;  // again: idempotent
    REQUIRE(stub->AllocateVolume(&ctx, alloc, &alloc_resp).ok());
  }
  {
    grpc::ClientContext ctx;
    alloc.set_collection("other");
    grpc::Status s = stub->AllocateVolume(&ctx, alloc, &alloc_resp);
    CHECK(s.error_code() == grpc::StatusCode::ALREADY_EXISTS);
  }
  CHECK(std::filesystem::exists(t.dir.path() + "/docs_5.dat"));

  for (uint64_t k = 1; k <= 20; ++k) {
    REQUIRE(t.Do("PUT", "/" + FileId{5, k, 7}.ToString(), RandomBlob(k, 4000)).status == 201);
  }

  BatchDeleteRequest del;
  for (uint64_t k = 1; k <= 15; ++k) del.add_fids(FileId{5, k, 7}.ToString());
  del.add_fids(FileId{5, 16, 8}.ToString());  // wrong cookie
  del.add_fids(FileId{5, 99, 7}.ToString());  // absent
  del.add_fids("garbage");
  BatchDeleteResponse del_resp;
  {
    grpc::ClientContext ctx;
    REQUIRE(stub->BatchDelete(&ctx, del, &del_resp).ok());
  }
  REQUIRE(del_resp.results_size() == 18);
  CHECK(del_resp.results(0).status() == 200);
  CHECK(del_resp.results(0).size() == 4000);
  CHECK(del_resp.results(15).status() == 404);
  CHECK(del_resp.results(16).status() == 404);
  CHECK(del_resp.results(17).status() == 400);
  CHECK(t.Do("GET", "/" + FileId{5, 16, 7}.ToString()).status == 200);

  StatusResponse st;
  {
    grpc::ClientContext ctx;
    REQUIRE(stub->Status(&ctx, StatusRequest(), &st).ok());
  }
  REQUIRE(st.volumes_size() == 1);
  CHECK(st.volumes(0).id() == 5);
  CHECK(st.volumes(0).collection() == "docs");
  CHECK(st.volumes(0).file_count() == 5);
  CHECK(st.volumes(0).delete_count() == 15);
  CHECK(st.volumes(0).max_key() == 20);
  CHECK(st.disk_total() > 0);
  const uint64_t size_before = st.volumes(0).size();

  VacuumRequest vac;
  vac.set_volume_id(5);
  vac.set_garbage_threshold(0.99);  // not reached: nothing happens
  VacuumResponse vac_resp;
  {
    grpc::ClientContext ctx;
    REQUIRE(stub->Vacuum(&ctx, vac, &vac_resp).ok());
    CHECK(vac_resp.compacted_size() == 0);
  }
  vac.set_garbage_threshold(0);  // the server default, 0.3
  {
    grpc::ClientContext ctx;
    REQUIRE(stub->Vacuum(&ctx, vac, &vac_resp).ok());
  }
  REQUIRE(vac_resp.compacted_size() == 1);
  CHECK(vac_resp.reclaimed_bytes() > 15 * 4000);
  CHECK(t.server->store().Get(5)->GetStats().size < size_before);
  for (uint64_t k = 16; k <= 20; ++k)
    CHECK(t.Do("GET", "/" + FileId{5, k, 7}.ToString()).body == RandomBlob(k, 4000));

  SetReadOnlyRequest ro;
  ro.set_volume_id(5);
  ro.set_read_only(true);
  SetReadOnlyResponse ro_resp;
  {
    grpc::ClientContext ctx;
    REQUIRE(stub->SetReadOnly(&ctx, ro, &ro_resp).ok());
  }
  CHECK(t.Do("PUT", "/" + FileId{5, 30, 7}.ToString(), "x").status == 403);
  CHECK(t.Do("GET", "/" + FileId{5, 16, 7}.ToString()).status == 200);

  DeleteVolumeRequest dv;
  dv.set_volume_id(5);
  DeleteVolumeResponse dv_resp;
  {
    grpc::ClientContext ctx;
    REQUIRE(stub->DeleteVolume(&ctx, dv, &dv_resp).ok());
  }
  CHECK_FALSE(std::filesystem::exists(t.dir.path() + "/docs_5.dat"));
  CHECK(t.Do("GET", "/" + FileId{5, 16, 7}.ToString()).status == 404);
  {
    grpc::ClientContext ctx;
    CHECK(stub->DeleteVolume(&ctx, dv, &dv_resp).error_code() == grpc::StatusCode::NOT_FOUND);
  }
}

TEST_CASE("heartbeats carry the server and its volumes, and survive a filer restart") {
  FakeCluster cluster;
  REQUIRE(cluster.Start().ok());
  TestServer t(&cluster, [](VolumeServer::Options& o) {
    o.data_center = "dc1";
    o.rack = "r7";
    o.max_volumes = 5;
  });
  REQUIRE(t.server->store().Allocate(3, "", "000").ok());
  REQUIRE(t.Do("PUT", "/" + FileId{3, 0x42, 1}.ToString(), "abc").status == 201);
  REQUIRE(WaitFor([&] {
    auto hb = cluster.LastHeartbeat(t.addr());
    return hb && hb->volumes_size() == 1 && hb->volumes(0).max_key() == 0x42;
  }));
  auto hb = *cluster.LastHeartbeat(t.addr());
  CHECK(hb.ip() == "127.0.0.1");
  CHECK(hb.port() == static_cast<uint32_t>(t.server->http_port()));
  CHECK(hb.grpc_port() == static_cast<uint32_t>(t.server->grpc_port()));
  CHECK(hb.public_url() == t.addr());
  CHECK(hb.data_center() == "dc1");
  CHECK(hb.rack() == "r7");
  CHECK(hb.max_volumes() == 5);
  CHECK(hb.disk_total() > 0);
  CHECK(hb.volumes(0).file_count() == 1);

  // The filer's volume size limit takes effect.
  cluster.SetReply(1000, 50);
  REQUIRE(WaitFor([&] { return t.server->store().volume_size_limit() == 1000; }));
  REQUIRE(t.Do("PUT", "/" + FileId{3, 0x43, 1}.ToString(), std::string(2000, 'x')).status == 201);
  CHECK(t.Do("PUT", "/" + FileId{3, 0x44, 1}.ToString(), "y").status == 403);
  REQUIRE(WaitFor([&] {
    auto h = cluster.LastHeartbeat(t.addr());
    return h && h->volumes_size() == 1 && h->volumes(0).read_only();
  }));

  // Filer restart: heartbeats resume on their own, once the server has seen them fail.
  REQUIRE(t.server->heartbeater() != nullptr);
  REQUIRE(t.server->heartbeater()->connected());
  cluster.Stop();
  REQUIRE(WaitFor([&] { return !t.server->heartbeater()->connected(); }));
  int before = cluster.heartbeats();
  REQUIRE(cluster.Start().ok());
  CHECK(WaitFor([&] { return cluster.heartbeats() > before + 2; }));
  CHECK(t.server->heartbeater()->connected());
}

TEST_CASE("the background vacuum compacts volumes over the threshold") {
  TestServer t(nullptr, [](VolumeServer::Options& o) {
    o.vacuum_interval_sec = 1;
    o.garbage_threshold = 0.5;
  });
  VacuumLoop* loop = t.server->vacuum_loop();
  REQUIRE(loop != nullptr);
  auto v = t.server->store().Allocate(1, "", "000");
  REQUIRE(v.ok());
  for (uint64_t k = 1; k <= 10; ++k)
    REQUIRE(t.Do("PUT", "/" + FileId{1, k, 1}.ToString(), RandomBlob(k, 10000)).status == 201);
  for (uint64_t k = 1; k <= 4; ++k)
    REQUIRE(t.Do("DELETE", "/" + FileId{1, k, 1}.ToString()).status == 202);
  // A pass that saw the 40% garbage (under the threshold) left the volume untouched.
  REQUIRE(loop->RunPassNow());
  CHECK((*v)->GetStats().delete_count == 4);
  for (uint64_t k = 5; k <= 7; ++k)
    REQUIRE(t.Do("DELETE", "/" + FileId{1, k, 1}.ToString()).status == 202);
  // 70%: the loop compacts it on its own, within an interval (no RunPassNow).
  CHECK(WaitFor([&] { return (*v)->GetStats().delete_count == 0; }, std::chrono::seconds(5)));
  CHECK((*v)->GetStats().size < 4 * 10100);
  for (uint64_t k = 8; k <= 10; ++k)
    CHECK(t.Do("GET", "/" + FileId{1, k, 1}.ToString()).body == RandomBlob(k, 10000));
}
