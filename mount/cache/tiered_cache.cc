#include "mount/cache/tiered_cache.h"

#include <algorithm>
#include <cstring>

#include "mount/cache/cache_format.h"
#include "mount/cache/disk_cache.h"
#include "mount/cache/memory_layer.h"
#include "shared/log.h"
#include "shared/status.h"

namespace kelp::mount::cache {

absl::StatusOr<std::unique_ptr<TieredCache>> TieredCache::Open(CacheOptions options) {
  TierLayout layout;
  if (options.capacity_bytes > 0) {
    ASSIGN_OR_RETURN(layout, TierLayout::FromOptions(options));
  }
  return std::unique_ptr<TieredCache>(new TieredCache(std::move(options), layout));
}

TieredCache::TieredCache(CacheOptions options, TierLayout layout)
    : options_(std::move(options)), layout_(layout), enabled_(options_.capacity_bytes > 0) {
  if (!enabled_) {
    spdlog::info("cache: off (capacity 0)");
    return;
  }
  counters_ = std::make_unique<CacheCounters>(options_.metrics);
  if (uint64_t mem = EffectiveMemoryBytes(options_); mem > 0) {
    memory_ = std::make_unique<MemoryLayer>(mem, options_.eviction);
  }
  if (!options_.dir.empty()) {
    DiskCache::Config c;
    c.dir = options_.dir;
    c.capacity_bytes = options_.capacity_bytes;
    c.shares_percent = options_.tier_shares_percent;
    c.layout = layout_;
    c.eviction = options_.eviction;
    c.backoff_ms = options_.disk_error_backoff_ms;
    c.testing_before_delete = options_.testing_before_delete;
    c.forget_pause_ms = options_.forget_pause_ms;
    disk_ = DiskCache::Open(c, counters_.get());
  }
  if (MetricsRegistry* r = options_.metrics) {
    for (int t = 0; t < kNumTiers; ++t) {
      Labels l = {{"tier", std::string(TierName(static_cast<Tier>(t)))}};
      metric_callbacks_.push_back(r->AddCallback(
          "kelp_cache_entries", "Entries in the disk cache.",
          [this, t] { return static_cast<double>(GetStats().tiers[t].entries); }, l));
      metric_callbacks_.push_back(r->AddCallback(
          "kelp_cache_used_bytes", "Disk bytes used by cache entries (as du counts them).",
          [this, t] { return static_cast<double>(GetStats().tiers[t].bytes); }, l));
    }
    metric_callbacks_.push_back(r->AddCallback(
        "kelp_cache_spare_bytes",
        "Disk bytes held by evicted entries' files kept for the next writes (spares).",
        [this] { return static_cast<double>(GetStats().disk_spare_bytes); }));
    metric_callbacks_.push_back(
        r->AddCallback("kelp_cache_memory_bytes", "Bytes held by the cache's memory layer.",
                       [this] { return static_cast<double>(GetStats().memory_bytes); }));
    metric_callbacks_.push_back(
        r->AddCallback("kelp_cache_capacity_bytes", "Disk capacity of the read cache.",
                       [this] { return static_cast<double>(options_.capacity_bytes); }));
  }
  spdlog::info(
      "cache: {:.0f} MiB on disk in '{}'{} (tiers <= {} B / <= {} B / larger, shares "
      "{}/{}/{}%, blocks whole/{}/{} KiB), memory {:.0f} MiB, eviction {}",
      static_cast<double>(options_.capacity_bytes) / (1 << 20), options_.dir,
      disk_ ? "" : " (disk tiers OFF)", layout_.small_max, layout_.medium_max,
      options_.tier_shares_percent[0], options_.tier_shares_percent[1],
      options_.tier_shares_percent[2], layout_.medium_block >> 10, layout_.large_block >> 10,
      static_cast<double>(EffectiveMemoryBytes(options_)) / (1 << 20),
      EvictionName(options_.eviction));
}

TieredCache::~TieredCache() {
  Close();
  if (options_.metrics) {
    for (int id : metric_callbacks_) options_.metrics->RemoveCallback(id);
  }
}

TieredCache::ByteRange TieredCache::FetchRange(uint64_t blob_size, uint64_t offset,
                                               uint64_t len) const {
  uint64_t end = std::min(blob_size, offset + len);
  if (offset >= end) return {offset, offset};
  if (!enabled_) return {offset, end};  // nothing will be cached: fetch only what is needed
  uint64_t bs = BlockSize(blob_size);
  return {offset / bs * bs, std::min(blob_size, (end + bs - 1) / bs * bs)};
}

bool TieredCache::Read(std::string_view fid, uint64_t blob_size, uint64_t offset, size_t len,
                       char* dst) {
  if (!enabled_) return false;
  if (len == 0) return true;
  if (offset >= blob_size || len > blob_size - offset) return false;
  Tier tier = TierOf(blob_size);
  uint64_t bs = BlockSize(blob_size);
  uint64_t end = offset + len;
  for (uint64_t block = offset / bs * bs; block < end; block += bs) {
    uint64_t block_len = std::min(bs, blob_size - block);
    uint64_t lo = std::max(offset, block), hi = std::min(end, block + block_len);
    if (!ReadBlock(tier, fid, blob_size, block, block_len, lo - block, hi - lo,
                   dst + (lo - offset))) {
      return false;
    }
  }
  return true;
}

bool TieredCache::ReadBlock(Tier tier, std::string_view fid, uint64_t blob_size,
                            uint64_t block_offset, uint64_t block_len, uint64_t offset_in_block,
                            size_t len, char* dst) {
  BlockId id{fid, blob_size, block_offset, BlockKey(fid, block_offset)};
  bool memory = tier == Tier::kSmall && memory_;
  if (memory && memory_->Read(id.key, fid, block_offset, offset_in_block, len, dst)) {
    counters_->Hit(tier, len, /*memory=*/true);
    return true;
  }
  if (disk_) {
    if (memory && memory_->Admits(block_len + fid.size())) {
      // Read (and verify) the whole small blob so the memory layer can serve the next read.
      auto whole = std::make_shared<std::string>(block_len, '\0');
      if (disk_->Read(tier, id, 0, block_len, whole->data())) {
        std::memcpy(dst, whole->data() + offset_in_block, len);
        memory_->Insert(id.key, fid, block_offset, std::move(whole));
        counters_->Hit(tier, len, /*memory=*/false);
        return true;
      }
    } else if (disk_->Read(tier, id, offset_in_block, len, dst)) {
      counters_->Hit(tier, len, /*memory=*/false);
      return true;
    }
  }
  counters_->Miss(tier, len);
  return false;
}

size_t TieredCache::Insert(std::string_view fid, uint64_t blob_size, uint64_t offset,
                           std::string_view data) {
  if (!enabled_ || data.empty() || offset >= blob_size || fid.empty() ||
      fid.size() > format::kMaxFidLen) {
    return 0;
  }
  Tier tier = TierOf(blob_size);
  uint64_t bs = BlockSize(blob_size);
  uint64_t end = std::min(blob_size, offset + data.size());
  size_t stored = 0;
  for (uint64_t block = (offset + bs - 1) / bs * bs; block < end; block += bs) {
    uint64_t block_len = std::min(bs, blob_size - block);
    if (block + block_len > end) break;
    stored += InsertBlock(tier, fid, blob_size, block, data.substr(block - offset, block_len));
  }
  return stored;
}

bool TieredCache::InsertBlock(Tier tier, std::string_view fid, uint64_t blob_size,
                              uint64_t block_offset, std::string_view data) {
  BlockId id{fid, blob_size, block_offset, BlockKey(fid, block_offset)};
  bool stored = false;
  if (tier == Tier::kSmall && memory_ && memory_->Admits(data.size() + fid.size())) {
    stored = memory_->Insert(id.key, fid, block_offset, std::make_shared<const std::string>(data));
  }
  if (disk_ && disk_->Insert(tier, id, data)) stored = true;
  return stored;
}

bool TieredCache::HasRoom(uint64_t bytes) const {
  if (!enabled_ || disk_ == nullptr) return true;
  return disk_->HasRoom(bytes);
}

void TieredCache::Forget(std::string_view fid, uint64_t blob_size) {
  if (!enabled_ || blob_size == 0 || fid.empty() || fid.size() > format::kMaxFidLen) return;
  Tier tier = TierOf(blob_size);
  uint64_t bs = BlockSize(blob_size);
  std::vector<BlockId> blocks;
  blocks.reserve((blob_size + bs - 1) / bs);
  for (uint64_t block = 0; block < blob_size; block += bs) {
    blocks.push_back({fid, blob_size, block, BlockKey(fid, block)});
    if (tier == Tier::kSmall && memory_) memory_->Erase(blocks.back().key, fid, block);
  }
  if (disk_) disk_->Forget(tier, blocks);
}

CacheStats TieredCache::GetStats() const {
  CacheStats s;
  s.enabled = enabled_;
  if (!enabled_) return s;
  counters_->Fill(&s);
  if (memory_) {
    s.memory_entries = memory_->entries();
    s.memory_bytes = memory_->bytes();
    s.memory_capacity = memory_->capacity();
  }
  if (disk_) disk_->FillStats(&s);
  return s;
}

void TieredCache::Close() {
  if (!enabled_ || closed_) return;
  closed_ = true;
  if (disk_) disk_->Close();
  spdlog::info("{}", GetStats().Summary());
}

}  // namespace kelp::mount::cache
