// CacheHook without the tiered cache library: the flags exist, reads go to volume servers.
#include "mount/cache_hook.h"
#include "shared/log.h"

namespace kelp::mount {
namespace {

class NoCacheHook : public CacheHook {
 public:
  void RegisterFlags(FlagSet* flags) override {
    flags->Add("cacheCapacityMB", &capacity_mb_, "local read cache capacity, in MiB; 0 = no cache");
    flags->Add("cacheDir", &dir_, "directory of the local read cache (empty = one per mount)");
  }
  absl::StatusOr<ChunkCache*> Open(uint64_t, const std::string&) override {
    if (capacity_mb_ > 0) spdlog::info("read cache: not built into this binary; reading from volume servers");
    return nullptr;
  }
  void Close() override {}

 private:
  uint64_t capacity_mb_ = 1000;
  std::string dir_;
};

}  // namespace

std::unique_ptr<CacheHook> NewCacheHook() { return std::make_unique<NoCacheHook>(); }

}  // namespace kelp::mount
