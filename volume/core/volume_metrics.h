// The volume server's Prometheus metrics, registered in the process-wide registry:
//   kelp_volume_requests_total{method,code}        requests answered
//   kelp_volume_request_seconds{method}            latency histogram
//   kelp_volume_bytes_total{direction="in"|"out"}  blob bytes received and sent
//   kelp_volume_checksum_failures_total, kelp_volume_fdatasyncs_total  (counted by the store)
//   kelp_volume_needles{server}, kelp_volume_bytes{server}, kelp_volume_count{server},
//   kelp_volume_index_memory_bytes{server}, kelp_volume_resident_bytes{server}  (at scrape time)
// Counters are shared by every volume server in the process; the scrape-time gauges are
// labelled with the server's address.
//
// Threads: Record is lock-free after the first request of each (method, code) pair.
#pragma once

#include <array>
#include <atomic>
#include <string>
#include <string_view>
#include <vector>

#include "shared/metrics.h"
#include "volume/store/store.h"

namespace kelp::volume {

class VolumeMetrics {
 public:
  explicit VolumeMetrics(Store* store);
  ~VolumeMetrics();
  // Registers the scrape-time gauges, labelled server="<ip:port>" (known once listening).
  void AddServerGauges(const std::string& server);
  VolumeMetrics(const VolumeMetrics&) = delete;
  VolumeMetrics& operator=(const VolumeMetrics&) = delete;

  void Record(std::string_view method, int code, uint64_t bytes_in, uint64_t bytes_out,
              double seconds);

 private:
  static constexpr int kMethods = 6;  // GET HEAD PUT POST DELETE other
  static constexpr int kCodes = 20;   // see CodeIndex
  static int MethodIndex(std::string_view method);
  static int CodeIndex(int code);
  Counter* RequestCounter(int m, int code);

  std::array<std::array<std::atomic<Counter*>, kCodes>, kMethods> requests_{};
  std::array<Histogram*, kMethods> latency_{};
  Counter* bytes_in_;
  Counter* bytes_out_;
  Store* const store_;
  std::vector<int> callbacks_;
};

}  // namespace kelp::volume
