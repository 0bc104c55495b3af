// CacheHook over the chunk-size-tiered read cache (mount/cache/tiered_cache.h).
#include "mount/cache/cache_flags.h"
#include "mount/cache/tiered_cache.h"
#include "mount/cache_hook.h"
#include "shared/log.h"
#include "shared/status.h"

namespace kelp::mount {
namespace {

class TieredChunkCache : public ChunkCache {
 public:
  explicit TieredChunkCache(cache::TieredCache* c) : c_(c) {}
  bool Read(std::string_view fid, uint64_t blob_size, uint64_t offset, size_t len, char* dst) override {
    return c_->Read(fid, blob_size, offset, len, dst);
  }
  void Insert(std::string_view fid, uint64_t blob_size, uint64_t block_offset, std::string_view data) override {
    c_->Insert(fid, blob_size, block_offset, data);
  }
  uint64_t BlockSize(uint64_t blob_size) const override { return c_->BlockSize(blob_size); }
  bool write_through() const override { return c_->write_through(); }

 private:
  cache::TieredCache* const c_;
};

class TieredCacheHook : public CacheHook {
 public:
  void RegisterFlags(FlagSet* flags) override { flags_.Register(flags); }
  absl::StatusOr<ChunkCache*> Open(uint64_t chunk_size, const std::string& default_dir) override {
    if (flags_.dir.empty()) flags_.dir = default_dir;
    ASSIGN_OR_RETURN(cache::CacheOptions o, flags_.ToOptions(chunk_size));
    ASSIGN_OR_RETURN(cache_, cache::TieredCache::Open(std::move(o)));
    if (!cache_->enabled()) return nullptr;
    adapter_ = std::make_unique<TieredChunkCache>(cache_.get());
    return adapter_.get();
  }
  void Close() override {
    if (cache_) cache_->Close();
  }

 private:
  cache::CacheFlags flags_;
  std::unique_ptr<cache::TieredCache> cache_;
  std::unique_ptr<TieredChunkCache> adapter_;
};

}  // namespace

std::unique_ptr<CacheHook> NewCacheHook() { return std::make_unique<TieredCacheHook>(); }

}  // namespace kelp::mount
