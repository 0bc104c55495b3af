#include "filer/cluster/topology.h"

#include <atomic>
#include <functional>
#include <map>
#include <set>
#include <thread>

#include <catch2/catch.hpp>

#include "shared/file_id.h"
#include "shared/status.h"

using namespace kelp;
using namespace kelp::filer;

namespace {

class FakeAdmin : public VolumeAdmin {
 public:
  absl::Status AllocateVolume(const std::string& addr, uint32_t vid, const std::string& collection,
                              const std::string& replication) override {
    MutexLock lock(mu);
    if (fail.count(addr)) return absl::UnavailableError("down");
    allocated[addr].insert(vid);
    return absl::OkStatus();
  }
  absl::StatusOr<volume::BatchDeleteResponse> BatchDelete(const std::string& addr,
                                                          const std::vector<std::string>& fids) override {
    MutexLock lock(mu);
    volume::BatchDeleteResponse r;
    for (const auto& f : fids) {
      auto* res = r.add_results();
      res->set_fid(f);
      res->set_status(200);
      deleted[addr].push_back(f);
    }
    return r;
  }
  Mutex mu;
  std::set<std::string> fail;
  std::map<std::string, std::set<uint32_t>> allocated;
  std::map<std::string, std::vector<std::string>> deleted;
};

// A clock the test moves by hand (Advance); the topology's liveness thread reads it too.
struct FakeClock {
  std::atomic<int64_t> ns{std::chrono::nanoseconds(std::chrono::hours(1)).count()};
  void Advance(std::chrono::milliseconds d) { ns += std::chrono::nanoseconds(d).count(); }
  std::function<std::chrono::steady_clock::time_point()> Fn() {
    return [this] { return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(ns.load())); };
  }
};

cluster::HeartbeatRequest Hb(int port, const std::string& rack = "r1") {
  cluster::HeartbeatRequest h;
  h.set_ip("127.0.0.1");
  h.set_port(port);
  h.set_grpc_port(port + 10000);
  h.set_rack(rack);
  h.set_max_volumes(8);
  h.set_disk_free(100);
  h.set_disk_total(200);
  return h;
}

}  // namespace

TEST_CASE("assign grows volumes, keys are unique, lookup finds replicas") {
  auto kv = NewMemoryKvStore();
  FakeAdmin admin;
  Topology::Options o;
  o.dead_after_ms = 100000;
  Topology topo(o, kv.get(), &admin);
  REQUIRE(topo.Start().ok());
  // No servers: a clear error, not a hang.
  CHECK(ErrnoOf(topo.Assign({}).status()) == ENOSPC);
  topo.Heartbeat(Hb(8080));
  topo.Heartbeat(Hb(8081));
  std::set<uint64_t> keys;
  std::set<uint32_t> vids;
  for (int i = 0; i < 100; ++i) {
    cluster::AssignRequest req;
    req.set_replication("001");
    auto r = topo.Assign(req);
    REQUIRE(r.ok());
    auto fid = FileId::Parse(r->fid());
    REQUIRE(fid.ok());
    CHECK(keys.insert(fid->key).second);
    vids.insert(fid->volume_id);
    CHECK(r->locations_size() == 2);
  }
  // Replication 001 on two servers: both got every volume.
  CHECK(admin.allocated["127.0.0.1:18080"] == admin.allocated["127.0.0.1:18081"]);
  cluster::LookupVolumeRequest lr;
  lr.add_volume_ids(*vids.begin());
  lr.add_volume_ids(999);
  auto l = topo.LookupVolume(lr);
  REQUIRE(l.ok());
  CHECK(l->volumes(0).locations_size() == 2);
  CHECK_FALSE(l->volumes(1).error().empty());
  CHECK(topo.GetCapacity().total_bytes == 400);
}

TEST_CASE("full and dead volumes are not assigned, a dead replica makes its volume read-only") {
  auto kv = NewMemoryKvStore();
  FakeAdmin admin;
  Topology::Options o;
  o.volume_size_limit = 1000;
  o.dead_after_ms = 50;
  o.growth_count = 1;
  FakeClock clock;
  o.now = clock.Fn();
  Topology topo(o, kv.get(), &admin);
  REQUIRE(topo.Start().ok());
  auto a = Hb(8080), b = Hb(8081);
  topo.Heartbeat(a);
  topo.Heartbeat(b);
  cluster::AssignRequest rep;
  rep.set_replication("001");
  auto first = topo.Assign(rep);
  REQUIRE(first.ok());
  uint32_t vid = FileId::Parse(first->fid())->volume_id;
  // Report the volume full on both replicas: the next assign grows a new one.
  for (auto* hb : {&a, &b}) {
    auto* v = hb->add_volumes();
    v->set_id(vid);
    v->set_replication("001");
    v->set_size(5000);
    topo.Heartbeat(*hb);
  }
  auto second = topo.Assign(rep);
  REQUIRE(second.ok());
  CHECK(FileId::Parse(second->fid())->volume_id != vid);
  // Server b stops heartbeating: 001 volumes cannot be written anywhere, but reads go to a.
  clock.Advance(std::chrono::milliseconds(120));
  topo.Heartbeat(a);
  topo.CheckLiveness();
  CHECK_FALSE(topo.HasWritable("", "001"));
  // Not ENOSPC: the room is there, on a server that is down.
  auto down = topo.Assign(rep);
  CHECK(down.status().code() == absl::StatusCode::kUnavailable);
  CHECK_THAT(std::string(down.status().message()), Catch::Contains("127.0.0.1:8081"));
  cluster::LookupVolumeRequest lr;
  lr.add_volume_ids(vid);
  auto l = topo.LookupVolume(lr);
  REQUIRE(l->volumes(0).locations_size() == 1);
  CHECK(l->volumes(0).locations(0).url() == "127.0.0.1:8080");
  // Replication 000 still works on the live server.
  CHECK(topo.Assign({}).ok());
  // Deleting blobs on a volume with a dead replica is deferred, not lost.
  auto del = topo.DeleteBlobs({first->fid(), "bad fid"});
  CHECK(del[0].code() == absl::StatusCode::kUnavailable);
  CHECK(del[1].code() == absl::StatusCode::kInvalidArgument);
  // b returns (reporting the grown volume too): writable again, deletes reach both replicas.
  auto* v2 = b.add_volumes();
  v2->set_id(FileId::Parse(second->fid())->volume_id);
  v2->set_replication("001");
  *a.add_volumes() = *v2;
  topo.Heartbeat(a);
  topo.Heartbeat(b);
  CHECK(topo.HasWritable("", "001"));
  auto del2 = topo.DeleteBlobs({second->fid()});
  CHECK(del2[0].ok());
  CHECK(admin.deleted["127.0.0.1:18080"].size() == 1);
  CHECK(admin.deleted["127.0.0.1:18081"].size() == 1);
}

TEST_CASE("keys stay unique across a filer restart and above what volumes report") {
  auto kv = NewMemoryKvStore();
  FakeAdmin admin;
  uint64_t last_key = 0;
  {
    Topology topo({}, kv.get(), &admin);
    REQUIRE(topo.Start().ok());
    topo.Heartbeat(Hb(8080));
    for (int i = 0; i < 10; ++i) last_key = FileId::Parse(topo.Assign({})->fid())->key;
  }
  Topology topo({}, kv.get(), &admin);
  REQUIRE(topo.Start().ok());
  auto hb = Hb(8080);
  auto* v = hb.add_volumes();
  v->set_id(1);
  v->set_max_key(5000000);
  topo.Heartbeat(hb);
  auto r = topo.Assign({});
  REQUIRE(r.ok());
  auto key = FileId::Parse(r->fid())->key;
  CHECK(key > last_key);
  CHECK(key > 5000000);
}

TEST_CASE("after a start, a lookup of a volume not yet reported waits for the heartbeat that reports it") {
  auto kv = NewMemoryKvStore();
  FakeAdmin admin;
  Topology topo({}, kv.get(), &admin);
  REQUIRE(topo.Start().ok());
  cluster::LookupVolumeRequest req;
  req.add_volume_ids(3);
  // Without a window a volume nobody reported is not found at once.
  CHECK_FALSE(topo.LookupMayWait());
  CHECK(topo.LookupVolume(req)->volumes(0).error() == "volume 3 not found");

  // The filer restarted: its volume servers have not found it yet. A reader's lookup waits
  // for the heartbeat that reports the volume rather than failing.
  topo.AwaitVolumesFor(std::chrono::seconds(60));
  CHECK(topo.LookupMayWait());
  absl::StatusOr<cluster::LookupVolumeResponse> got;
  std::thread reader([&] { got = topo.LookupVolume(req); });
  topo.Heartbeat(Hb(8080));  // another server, without it: the reader goes on waiting
  auto hb = Hb(8081);
  hb.add_volumes()->set_id(3);
  topo.Heartbeat(hb);
  reader.join();
  REQUIRE(got.ok());
  REQUIRE(got->volumes_size() == 1);
  CHECK(got->volumes(0).error().empty());
  REQUIRE(got->volumes(0).locations_size() == 1);
  CHECK(got->volumes(0).locations(0).url() == "127.0.0.1:8081");

  // A volume that never shows up is reported missing when the window ends.
  topo.AwaitVolumesFor(std::chrono::milliseconds(50));
  cluster::LookupVolumeRequest gone;
  gone.add_volume_ids(9);
  CHECK(topo.LookupVolume(gone)->volumes(0).error() == "volume 9 not found");
  CHECK_FALSE(topo.LookupMayWait());
}

TEST_CASE("in that window a volume whose server went silent is answered at once") {
  auto kv = NewMemoryKvStore();
  FakeAdmin admin;
  FakeClock clock;
  Topology::Options o;
  o.now = clock.Fn();
  o.dead_after_ms = 1000;
  Topology topo(o, kv.get(), &admin);
  REQUIRE(topo.Start().ok());
  auto hb = Hb(8080);
  hb.add_volumes()->set_id(5);
  topo.Heartbeat(hb);
  clock.Advance(std::chrono::seconds(2));
  topo.CheckLiveness();
  topo.AwaitVolumesFor(std::chrono::hours(1));
  cluster::LookupVolumeRequest req;
  req.add_volume_ids(5);
  auto t0 = std::chrono::steady_clock::now();
  auto r = topo.LookupVolume(req);  // would wait the hour if it waited at all
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30));
  REQUIRE(r.ok());
  CHECK(r->volumes(0).error() == "volume 5 has no live replica");
}

TEST_CASE("assign picks among exactly the writable volumes of its layout as they change") {
  auto kv = NewMemoryKvStore();
  FakeAdmin admin;
  Topology::Options o;
  o.volume_size_limit = 1000;
  o.dead_after_ms = 50;
  o.pulse_ms = 10;  // the grace for a volume the filer allocated is 3 pulses
  FakeClock clock;
  o.now = clock.Fn();
  Topology topo(o, kv.get(), &admin);
  REQUIRE(topo.Start().ok());
  std::vector<cluster::HeartbeatRequest> hb = {Hb(8080), Hb(8081), Hb(8082)};
  for (auto& h : hb) topo.Heartbeat(h);
  // Six volumes of layout ("", 000) and two of ("c", 000): the layouts never mix.
  REQUIRE(topo.GrowVolumes("", "000", 6).ok());
  REQUIRE(topo.GrowVolumes("c", "000", 2).ok());
  std::map<uint32_t, std::string> server_of;  // vid -> url
  std::set<uint32_t> in_c;
  for (const auto& [addr, vids] : admin.allocated) {
    std::string url = "127.0.0.1:" + std::to_string(std::stoi(addr.substr(addr.find(':') + 1)) - 10000);
    for (uint32_t vid : vids) server_of[vid] = url;
  }
  REQUIRE(server_of.size() == 8);
  cluster::AssignRequest c;
  c.set_collection("c");
  for (int i = 0; i < 50; ++i) in_c.insert(FileId::Parse(topo.Assign(c)->fid())->volume_id);
  REQUIRE(in_c.size() == 2);
  auto assigned = [&](int n) {
    std::set<uint32_t> got;
    for (int i = 0; i < n; ++i) {
      auto r = topo.Assign({});
      REQUIRE(r.ok());
      got.insert(FileId::Parse(r->fid())->volume_id);
    }
    return got;
  };
  std::set<uint32_t> all;
  for (const auto& [vid, url] : server_of) {
    if (!in_c.count(vid)) all.insert(vid);
  }
  CHECK(assigned(300) == all);
  // Every server now reports its volumes; one volume of the default layout is full.
  clock.Advance(std::chrono::milliseconds(40));  // past the allocation grace
  uint32_t full = *all.begin();
  // Every server reports its volumes, each of size_of(vid) bytes, padded to pad_to volumes with
  // full ones of another collection.
  auto report_sized = [&](const std::function<uint64_t(uint32_t)>& size_of, int pad_to) {
    for (auto& h : hb) {
      h.clear_volumes();
      std::string url = "127.0.0.1:" + std::to_string(h.port());
      for (const auto& [vid, where] : server_of) {
        if (where != url) continue;
        auto* v = h.add_volumes();
        v->set_id(vid);
        v->set_collection(in_c.count(vid) ? "c" : "");
        v->set_size(size_of(vid));
      }
      for (int i = h.volumes_size(); i < pad_to; ++i) {
        auto* v = h.add_volumes();
        v->set_id(100 + h.port() * 4 + i);
        v->set_collection("other");
        v->set_size(5000);
      }
      topo.Heartbeat(h);
    }
  };
  auto report = [&](bool with_full_size) {
    report_sized([&](uint32_t vid) -> uint64_t { return with_full_size && vid == full ? 5000 : 10; }, 0);
  };
  report(true);
  std::set<uint32_t> expect = all;
  expect.erase(full);
  CHECK(assigned(300) == expect);
  // The server of another volume stops heartbeating: its volumes leave the list.
  std::string dead = server_of[*expect.rbegin()];
  clock.Advance(std::chrono::milliseconds(100));
  for (auto& h : hb) {
    if ("127.0.0.1:" + std::to_string(h.port()) != dead) topo.Heartbeat(h);
  }
  topo.CheckLiveness();
  for (const auto& [vid, url] : server_of) {
    if (url == dead) expect.erase(vid);
  }
  REQUIRE_FALSE(expect.empty());
  CHECK(assigned(300) == expect);
  // It returns and the full volume was vacuumed: all are writable again.
  report(false);
  CHECK(assigned(300) == all);
  // A server stops reporting a volume (deleted there): it is forgotten, not assigned.
  uint32_t gone = *all.rbegin();
  server_of.erase(gone);
  report(false);
  all.erase(gone);
  CHECK(assigned(300) == all);
  // Every server full and one dead: a full cluster is ENOSPC, not "unavailable".
  for (auto& h : hb) h.set_max_volumes(3);
  clock.Advance(std::chrono::milliseconds(100));
  report_sized([](uint32_t) -> uint64_t { return 5000; }, 3);  // every slot taken, every volume full
  // Then one of them stops heartbeating.
  clock.Advance(std::chrono::milliseconds(100));
  for (auto& h : hb) {
    if ("127.0.0.1:" + std::to_string(h.port()) != dead) topo.Heartbeat(h);
  }
  topo.CheckLiveness();
  CHECK(ErrnoOf(topo.Assign({}).status()) == ENOSPC);
  cluster::LookupVolumeRequest lr;
  lr.add_volume_ids(gone);
  CHECK_FALSE(topo.LookupVolume(lr)->volumes(0).error().empty());
}
