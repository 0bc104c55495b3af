// kill -9 of a `kelp volume` process in the middle of a write storm, then a restart on the
// same directory: every blob whose upload was acknowledged must read back intact, and the
// server must accept writes again. Multi-process, so it lives in tests/.
#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "shared/file_id.h"
#include "shared/status.h"
#include "tests/harness/cluster.h"
#include "volume/client/volume_client.h"
#include "volume/store/test_util.h"

using kelp::FileId;
using kelp::testing::TestCluster;
using kelp::testing::WaitFor;
using kelp::volume::VolumeClient;
using kelp::volume::testing::RandomBlob;

namespace {

std::string Blob(uint64_t key) { return RandomBlob(key, 100 + (key * 7919) % 300000); }

}  // namespace

TEST_CASE("kill -9 during writes loses nothing acknowledged") {
  // One volume server and no filer: the test allocates the volume itself.
  TestCluster::Options o;
  o.filers = 0;
  o.volume_flags = {"-logLevel=warn", "-vacuumIntervalSec=0"};
  o.name = "kelp-volume-crash";
  TestCluster c(o);
  VolumeClient client;
  // Up once the gRPC plane answers too (the fixture waited for HTTP).
  auto grpc_up = [&] { return client.GetStatus(c.volume_grpc()).ok(); };
  REQUIRE(WaitFor(grpc_up, std::chrono::seconds(20)));
  absl::Status allocated = client.AllocateVolume(c.volume_grpc(), 1, "", "000");
  INFO(allocated.ToString());
  REQUIRE(allocated.ok());
  std::mutex mu;
  std::vector<uint64_t> acked;
  std::atomic<uint64_t> next{1};
  std::atomic<bool> stop{false};
  std::vector<std::thread> writers;
  for (int t = 0; t < 8; ++t) {
    writers.emplace_back([&, t] {
      while (!stop) {
        uint64_t key = next++;
        auto r =
            client.Upload(c.volume(), FileId{1, key, 0xfeed}.ToString(), Blob(key), t % 4 == 0);
        if (r.ok()) {
          std::lock_guard l(mu);
          acked.push_back(key);
        }
      }
    });
  }
  // Let a few hundred writes land, then pull the plug mid-storm.
  while (true) {
    {
      std::lock_guard l(mu);
      if (acked.size() >= 300) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  c.KillVolume(0);
  stop = true;
  for (auto& w : writers) w.join();
  INFO(acked.size() << " acknowledged writes before the kill");

  c.StartVolume(0);
  REQUIRE(WaitFor(grpc_up, std::chrono::seconds(20)));
  for (uint64_t key : acked) {
    auto r = client.Read(c.volume(), FileId{1, key, 0xfeed}.ToString());
    INFO("key " << key << ": " << r.status().ToString());
    REQUIRE(r.ok());
    REQUIRE(*r == Blob(key));
  }
  // And the volume takes writes again.
  uint64_t key = next++;
  REQUIRE(client.Upload(c.volume(), FileId{1, key, 0xfeed}.ToString(), Blob(key), true).ok());
  REQUIRE(*client.Read(c.volume(), FileId{1, key, 0xfeed}.ToString()) == Blob(key));
}
