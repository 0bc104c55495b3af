#include "volume/core/volume_metrics.h"

#include "shared/strings.h"

namespace kelp::volume {
namespace {

constexpr std::string_view kMethodNames[] = {"GET", "HEAD", "PUT", "POST", "DELETE", "other"};
// The codes this server answers with; anything else is counted under the last slot.
constexpr int kKnownCodes[] = {200, 201, 202, 204, 206, 304, 400, 403, 404, 405,
                               409, 413, 416, 431, 500, 502, 503, 504, 507, 0};

}  // namespace

int VolumeMetrics::MethodIndex(std::string_view method) {
  for (int i = 0; i < kMethods - 1; ++i) {
    if (kMethodNames[i] == method) return i;
  }
  return kMethods - 1;
}

int VolumeMetrics::CodeIndex(int code) {
  for (int i = 0; i < kCodes - 1; ++i) {
    if (kKnownCodes[i] == code) return i;
  }
  return kCodes - 1;
}

VolumeMetrics::VolumeMetrics(Store* store) : store_(store) {
  auto& reg = MetricsRegistry::Default();
  for (int m = 0; m < kMethods; ++m) {
    latency_[m] =
        reg.GetHistogram("kelp_volume_request_seconds", "Volume server request latency in seconds",
                         {{"method", std::string(kMethodNames[m])}});
  }
  bytes_in_ = reg.GetCounter("kelp_volume_bytes_total", "Blob bytes received and sent",
                             {{"direction", "in"}});
  bytes_out_ = reg.GetCounter("kelp_volume_bytes_total", "Blob bytes received and sent",
                              {{"direction", "out"}});
  // Make the failure counter visible (as 0) before the first failure.
  reg.GetCounter("kelp_volume_checksum_failures_total",
                 "Needles whose checksum or header did not verify on read");
}

void VolumeMetrics::AddServerGauges(const std::string& server) {
  auto& reg = MetricsRegistry::Default();
  Store* store = store_;
  Labels l = {{"server", server}};
  auto sum = [store](auto field) {
    return [store, field] {
      double total = 0;
      for (const auto& v : store->List()) total += static_cast<double>(field(v->GetStats()));
      return total;
    };
  };
  callbacks_.push_back(reg.AddCallback("kelp_volume_needles", "Live needles on this server",
                                       sum([](const Volume::Stats& s) { return s.file_count; }),
                                       l));
  callbacks_.push_back(reg.AddCallback("kelp_volume_bytes",
                                       "Bytes in the .dat files of this server",
                                       sum([](const Volume::Stats& s) { return s.size; }), l));
  callbacks_.push_back(reg.AddCallback("kelp_volume_garbage_bytes", "Bytes a vacuum would reclaim",
                                       sum([](const Volume::Stats& s) { return s.deleted_bytes; }),
                                       l));
  callbacks_.push_back(reg.AddCallback("kelp_volume_index_memory_bytes",
                                       "Memory held by the in-memory needle maps",
                                       sum([](const Volume::Stats& s) { return s.map_bytes; }), l));
  callbacks_.push_back(reg.AddCallback(
      "kelp_volume_count", "Volumes on this server",
      [store] { return static_cast<double>(store->List().size()); }, l));
  callbacks_.push_back(reg.AddCallback(
      "kelp_volume_resident_bytes", "Resident memory of the process in bytes",
      [] { return static_cast<double>(ResidentBytes()); }, l));
}

VolumeMetrics::~VolumeMetrics() {
  for (int id : callbacks_) MetricsRegistry::Default().RemoveCallback(id);
}

Counter* VolumeMetrics::RequestCounter(int m, int code) {
  int c = CodeIndex(code);
  Counter* counter = requests_[m][c].load(std::memory_order_acquire);
  if (counter == nullptr) {
    std::string code_label = c == kCodes - 1 ? std::string("other") : kelp::StrCat(code);
    counter = MetricsRegistry::Default().GetCounter(
        "kelp_volume_requests_total", "Volume server requests answered",
        {{"method", std::string(kMethodNames[m])}, {"code", code_label}});
    requests_[m][c].store(counter, std::memory_order_release);
  }
  return counter;
}

void VolumeMetrics::Record(std::string_view method, int code, uint64_t bytes_in, uint64_t bytes_out,
                           double seconds) {
  int m = MethodIndex(method);
  RequestCounter(m, code)->Inc();
  latency_[m]->Observe(seconds);
  if (bytes_in) bytes_in_->Inc(bytes_in);
  if (bytes_out) bytes_out_->Inc(bytes_out);
}

}  // namespace kelp::volume
