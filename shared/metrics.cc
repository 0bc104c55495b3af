#include "shared/metrics.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>

#include "shared/strings.h"

namespace kelp {
namespace {

std::string RenderLabels(const Labels& labels) {
  if (labels.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i) out += ",";
    kelp::StrAppend(&out, labels[i].first, "=\"");
    for (char c : labels[i].second) {
      if (c == '"' || c == '\\') out += '\\';
      if (c == '\n') {
        out += "\\n";
        continue;
      }
      out += c;
    }
    out += "\"";
  }
  return out + "}";
}

// Inserts an extra label (le="...") into a rendered label set.
std::string WithLabel(const std::string& rendered, std::string_view extra) {
  if (rendered.empty()) return kelp::StrCat("{", extra, "}");
  return kelp::StrCat(rendered.substr(0, rendered.size() - 1), ",", extra, "}");
}

std::string FormatDouble(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), buckets_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  for (size_t i = 0; i <= bounds_.size(); ++i) buckets_[i].store(0);
}

void Histogram::Observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_micros_.fetch_add(static_cast<uint64_t>(v * 1e6), std::memory_order_relaxed);
}

std::vector<uint64_t> Histogram::counts() const {
  std::vector<uint64_t> out(bounds_.size() + 1);
  uint64_t acc = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    acc += buckets_[i].load(std::memory_order_relaxed);
    out[i] = acc;
  }
  return out;
}

double Histogram::sum() const { return sum_micros_.load(std::memory_order_relaxed) / 1e6; }

std::vector<double> Histogram::LatencyBounds() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

MetricsRegistry& MetricsRegistry::Default() {
  static MetricsRegistry* r = new MetricsRegistry;
  return *r;
}

MetricsRegistry::Family& MetricsRegistry::FamilyFor(std::string_view name, std::string_view help,
                                                    std::string_view type) {
  auto it = families_.find(name);
  if (it == families_.end()) {
    Family fam;
    fam.help = std::string(help);
    fam.type = std::string(type);
    it = families_.emplace(std::string(name), std::move(fam)).first;
  }
  return it->second;
}

Counter* MetricsRegistry::GetCounter(std::string_view name, std::string_view help, const Labels& labels) {
  MutexLock lock(mu_);
  auto& slot = FamilyFor(name, help, "counter").counters[RenderLabels(labels)];
  if (!slot) slot = std::make_unique<Counter>();
  return slot.get();
}

Gauge* MetricsRegistry::GetGauge(std::string_view name, std::string_view help, const Labels& labels) {
  MutexLock lock(mu_);
  auto& slot = FamilyFor(name, help, "gauge").gauges[RenderLabels(labels)];
  if (!slot) slot = std::make_unique<Gauge>();
  return slot.get();
}

Histogram* MetricsRegistry::GetHistogram(std::string_view name, std::string_view help,
                                         const Labels& labels) {
  MutexLock lock(mu_);
  auto& slot = FamilyFor(name, help, "histogram").histograms[RenderLabels(labels)];
  if (!slot) slot = std::make_unique<Histogram>(Histogram::LatencyBounds());
  return slot.get();
}

int MetricsRegistry::AddCallback(std::string_view name, std::string_view help,
                                 std::function<double()> fn, const Labels& labels) {
  MutexLock lock(mu_);
  int id = next_callback_++;
  FamilyFor(name, help, "gauge").callbacks[id] = {RenderLabels(labels), std::move(fn)};
  return id;
}

void MetricsRegistry::RemoveCallback(int id) {
  MutexLock lock(mu_);
  for (auto& [name, fam] : families_) fam.callbacks.erase(id);
}

std::string MetricsRegistry::Render() const {
  MutexLock lock(mu_);
  std::string out;
  for (const auto& [name, fam] : families_) {
    if (fam.counters.empty() && fam.gauges.empty() && fam.histograms.empty() && fam.callbacks.empty()) {
      continue;
    }
    kelp::StrAppend(&out, "# HELP ", name, " ", fam.help, "\n# TYPE ", name, " ", fam.type, "\n");
    for (const auto& [l, c] : fam.counters) kelp::StrAppend(&out, name, l, " ", c->value(), "\n");
    for (const auto& [l, g] : fam.gauges) kelp::StrAppend(&out, name, l, " ", g->value(), "\n");
    for (const auto& [id, cb] : fam.callbacks) {
      kelp::StrAppend(&out, name, cb.first, " ", FormatDouble(cb.second()), "\n");
    }
    for (const auto& [l, h] : fam.histograms) {
      auto counts = h->counts();
      for (size_t i = 0; i < counts.size(); ++i) {
        double b = i < h->bounds().size() ? h->bounds()[i] : INFINITY;
        kelp::StrAppend(&out, name, "_bucket", WithLabel(l, kelp::StrCat("le=\"", FormatDouble(b), "\"")),
                        " ", counts[i], "\n");
      }
      kelp::StrAppend(&out, name, "_sum", l, " ", FormatDouble(h->sum()), "\n");
      kelp::StrAppend(&out, name, "_count", l, " ", h->count(), "\n");
    }
  }
  return out;
}

uint64_t ResidentBytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long size = 0, resident = 0;
  int n = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  return n == 2 ? resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) : 0;
}

void RegisterProcessMetrics() {
  static bool once = [] {
    auto& r = MetricsRegistry::Default();
    r.AddCallback("process_resident_memory_bytes", "Resident memory size in bytes.",
                  [] { return static_cast<double>(ResidentBytes()); });
    return true;
  }();
  (void)once;
}

}  // namespace kelp
