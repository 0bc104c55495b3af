#include "mount/cache/cache_stats.h"

#include <fmt/format.h>

namespace kelp::mount::cache {

CacheCounters::CacheCounters(MetricsRegistry* r) {
  if (!r) return;
  for (int i = 0; i < kNumTiers; ++i) {
    Labels l = {{"tier", std::string(TierName(static_cast<Tier>(i)))}};
    PerTier& t = tiers_[i];
    t.hits.metric = r->GetCounter("kelp_cache_hits_total", "Read cache block hits.", l);
    t.memory_hits.metric = r->GetCounter("kelp_cache_memory_hits_total",
                                         "Read cache hits served from the memory layer.", l);
    t.misses.metric = r->GetCounter("kelp_cache_misses_total", "Read cache block misses.", l);
    t.hit_bytes.metric =
        r->GetCounter("kelp_cache_hit_bytes_total", "Bytes served from the read cache.", l);
    t.miss_bytes.metric = r->GetCounter("kelp_cache_miss_bytes_total",
                                        "Bytes asked of the read cache and not found.", l);
    t.inserts.metric =
        r->GetCounter("kelp_cache_inserts_total", "Blocks written to the disk cache.", l);
    t.insert_bytes.metric =
        r->GetCounter("kelp_cache_insert_bytes_total", "Data bytes written to the disk cache.", l);
    t.evictions.metric =
        r->GetCounter("kelp_cache_evictions_total", "Disk cache entries evicted.", l);
    t.forgotten.metric = r->GetCounter("kelp_cache_forgotten_total",
                                       "Disk cache entries dropped because their blob was deleted.", l);
    t.checksum_failures.metric = r->GetCounter("kelp_cache_checksum_failures_total",
                                               "Cache entries dropped for a bad checksum.", l);
  }
  disk_errors_.metric = r->GetCounter("kelp_cache_disk_errors_total",
                                      "Cache disk I/O errors (each degraded to a miss).");
  files_reused_.metric = r->GetCounter(
      "kelp_cache_files_reused_total",
      "Disk cache entries written over an evicted entry's file (a spare) instead of a new file.");
}

void CacheCounters::Hit(Tier tier, uint64_t bytes, bool memory) {
  PerTier& t = tiers_[TierIndex(tier)];
  t.hits.Inc(1);
  t.hit_bytes.Inc(bytes);
  if (memory) t.memory_hits.Inc(1);
}

void CacheCounters::Miss(Tier tier, uint64_t bytes) {
  PerTier& t = tiers_[TierIndex(tier)];
  t.misses.Inc(1);
  t.miss_bytes.Inc(bytes);
}

void CacheCounters::Inserted(Tier tier, uint64_t bytes) {
  PerTier& t = tiers_[TierIndex(tier)];
  t.inserts.Inc(1);
  t.insert_bytes.Inc(bytes);
}

void CacheCounters::Evicted(Tier tier) { tiers_[TierIndex(tier)].evictions.Inc(1); }
void CacheCounters::Forgotten(Tier tier) { tiers_[TierIndex(tier)].forgotten.Inc(1); }
void CacheCounters::ChecksumFailure(Tier tier) { tiers_[TierIndex(tier)].checksum_failures.Inc(1); }
void CacheCounters::DiskError() { disk_errors_.Inc(1); }
void CacheCounters::FileReused() { files_reused_.Inc(1); }

void CacheCounters::Fill(CacheStats* s) const {
  for (int i = 0; i < kNumTiers; ++i) {
    const PerTier& t = tiers_[i];
    TierStats& o = s->tiers[i];
    o.hits = t.hits.get();
    o.memory_hits = t.memory_hits.get();
    o.misses = t.misses.get();
    o.hit_bytes = t.hit_bytes.get();
    o.miss_bytes = t.miss_bytes.get();
    o.inserts = t.inserts.get();
    o.insert_bytes = t.insert_bytes.get();
    o.evictions = t.evictions.get();
    o.forgotten = t.forgotten.get();
    o.checksum_failures = t.checksum_failures.get();
  }
  s->disk_errors = disk_errors_.get();
  s->files_reused = files_reused_.get();
}

uint64_t CacheStats::hits() const {
  uint64_t n = 0;
  for (const TierStats& t : tiers) n += t.hits;
  return n;
}

uint64_t CacheStats::misses() const {
  uint64_t n = 0;
  for (const TierStats& t : tiers) n += t.misses;
  return n;
}

double CacheStats::HitRatio() const {
  uint64_t total = hits() + misses();
  return total ? static_cast<double>(hits()) / static_cast<double>(total) : 0.0;
}

std::string CacheStats::Summary() const {
  if (!enabled) return "cache: off";
  auto mib = [](uint64_t b) { return static_cast<double>(b) / (1 << 20); };
  std::string out =
      fmt::format("cache: hits {} ({:.1f}%) misses {}", hits(), 100 * HitRatio(), misses());
  for (int i = 0; i < kNumTiers; ++i) {
    const TierStats& t = tiers[i];
    out += fmt::format(" | {} hits={} misses={} {:.1f}/{:.1f}MiB entries={} evictions={}",
                       TierName(static_cast<Tier>(i)), t.hits, t.misses, mib(t.bytes),
                       mib(t.share_bytes), t.entries, t.evictions);
    if (t.checksum_failures) out += fmt::format(" checksum_failures={}", t.checksum_failures);
  }
  out += fmt::format(
      " | memory hits={} {:.1f}/{:.1f}MiB | disk {}{:.1f}MiB meta={:.2f}MiB spares={:.1f}MiB "
      "errors={}",
      tiers[0].memory_hits, mib(memory_bytes), mib(memory_capacity), disk_enabled ? "" : "OFF ",
      mib(disk_capacity), mib(disk_meta_bytes), mib(disk_spare_bytes), disk_errors);
  return out;
}

}  // namespace kelp::mount::cache
