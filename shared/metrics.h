// Process-wide metrics, exposed as Prometheus text on every server's GET /metrics.
// Registration (Counter/Gauge/Histogram) takes a lock and returns a stable pointer: do it
// once, at construction. Updating a metric is lock-free and safe from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "shared/mutex.h"

namespace kelp {

using Labels = std::vector<std::pair<std::string, std::string>>;

class Counter {
 public:
  void Inc(uint64_t n = 1) { v_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t value() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> v_{0};
};

class Gauge {
 public:
  void Set(int64_t v) { v_.store(v, std::memory_order_relaxed); }
  void Add(int64_t d) { v_.fetch_add(d, std::memory_order_relaxed); }
  int64_t value() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> v_{0};
};

// Latency histogram with fixed buckets (seconds, upper bounds).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double v);
  std::vector<uint64_t> counts() const;  // cumulative, one per bound, then +Inf
  const std::vector<double>& bounds() const { return bounds_; }
  double sum() const;
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }

  static std::vector<double> LatencyBounds();  // 100 us .. 10 s

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sum_micros_{0};
};

class MetricsRegistry {
 public:
  // The registry every server exposes.
  static MetricsRegistry& Default();

  Counter* GetCounter(std::string_view name, std::string_view help, const Labels& labels = {});
  Gauge* GetGauge(std::string_view name, std::string_view help, const Labels& labels = {});
  Histogram* GetHistogram(std::string_view name, std::string_view help, const Labels& labels = {});
  // A gauge computed at scrape time (e.g. resident memory, volume count). The callback must be
  // cheap and thread-safe; its owner calls RemoveCallback before it dies.
  int AddCallback(std::string_view name, std::string_view help, std::function<double()> fn,
                  const Labels& labels = {});
  void RemoveCallback(int id);

  std::string Render() const;  // Prometheus text exposition format 0.0.4

 private:
  struct Family {
    std::string help, type;
    std::map<std::string, std::unique_ptr<Counter>> counters;  // key: rendered labels
    std::map<std::string, std::unique_ptr<Gauge>> gauges;
    std::map<std::string, std::unique_ptr<Histogram>> histograms;
    std::map<int, std::pair<std::string, std::function<double()>>> callbacks;
  };
  Family& FamilyFor(std::string_view name, std::string_view help, std::string_view type)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable Mutex mu_;
  std::map<std::string, Family, std::less<>> families_ ABSL_GUARDED_BY(mu_);
  int next_callback_ ABSL_GUARDED_BY(mu_) = 1;
};

// Process resident set size in bytes (from /proc/self/statm).
uint64_t ResidentBytes();

// Registers process-wide gauges (resident memory, threads) once; idempotent.
void RegisterProcessMetrics();

}  // namespace kelp
