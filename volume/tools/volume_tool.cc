// volume_tool: pokes a standalone volume server, for benchmarks and debugging.
//   volume_tool allocate GRPC_ADDR VID [REPLICATION]   create a volume
//   volume_tool fill HTTP_ADDR VID COUNT SIZE [THREADS]  upload keys 1..COUNT (cookie 0x12345678)
//   volume_tool status GRPC_ADDR                        print the volumes
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "shared/file_id.h"
#include "shared/strings.h"
#include "volume/client/volume_client.h"

namespace {

constexpr uint32_t kCookie = 0x12345678;

int Usage() {
  std::fprintf(stderr,
               "usage: volume_tool allocate GRPC_ADDR VID [REPLICATION]\n"
               "       volume_tool fill HTTP_ADDR VID COUNT SIZE [THREADS]\n"
               "       volume_tool status GRPC_ADDR\n");
  return 2;
}

int Allocate(const std::string& addr, uint32_t vid, const std::string& replication) {
  absl::Status s = kelp::volume::VolumeClient().AllocateVolume(addr, vid, "", replication);
  if (!s.ok()) {
    std::fprintf(stderr, "allocate: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}

int Status(const std::string& addr) {
  auto st = kelp::volume::VolumeClient().GetStatus(addr);
  if (!st.ok()) {
    std::fprintf(stderr, "status: %s\n", std::string(st.status().message()).c_str());
    return 1;
  }
  std::printf("%s\n", st->DebugString().c_str());
  return 0;
}

int Fill(const std::string& addr, uint32_t vid, uint64_t count, size_t size, int threads) {
  kelp::volume::VolumeClient client;
  std::atomic<uint64_t> next{1}, failed{0};
  std::string blob(size, 'k');
  auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      for (uint64_t k = next++; k <= count; k = next++) {
        auto r = client.Upload(addr, kelp::FileId{vid, k, kCookie}.ToString(), blob);
        if (!r.ok() && failed++ == 0)
          std::fprintf(stderr, "fill: %s\n", std::string(r.status().message()).c_str());
      }
    });
  }
  for (auto& w : workers) w.join();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("filled %llu blobs of %zu bytes in %.1f s (%.0f/s), %llu failed\n",
              static_cast<unsigned long long>(count), size, secs, count / secs,
              static_cast<unsigned long long>(failed.load()));
  return failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> a(argv + 1, argv + argc);
  uint32_t vid = 0;
  if (a.size() >= 3 && a[0] == "allocate" && kelp::ParseInt(a[2], &vid)) {
    return Allocate(a[1], vid, a.size() > 3 ? a[3] : "000");
  }
  uint64_t count = 0;
  size_t size = 0;
  int threads = 16;
  if (a.size() >= 5 && a[0] == "fill" && kelp::ParseInt(a[2], &vid) &&
      kelp::ParseInt(a[3], &count) && kelp::ParseInt(a[4], &size) &&
      (a.size() < 6 || kelp::ParseInt(a[5], &threads))) {
    return Fill(a[1], vid, count, size, threads);
  }
  if (a.size() == 2 && a[0] == "status") return Status(a[1]);
  return Usage();
}
