#include "volume/store/fault_env.h"

#include <cerrno>

#include "shared/status.h"

namespace kelp::volume {

class FaultFile : public File {
 public:
  FaultFile(FaultEnv* env, std::shared_ptr<File> base) : env_(env), base_(std::move(base)) {}

  absl::StatusOr<size_t> ReadAt(uint64_t offset, size_t n, char* buf) const override {
    return base_->ReadAt(offset, n, buf);
  }
  absl::StatusOr<size_t> WriteAt(uint64_t offset, std::string_view data) override {
    bool enospc = false;
    size_t n = env_->Admit(data.size(), &enospc);
    if (enospc) return PosixError(ENOSPC, "pwrite: No space left on device (injected)");
    ASSIGN_OR_RETURN(size_t w, base_->WriteAt(offset, data.substr(0, n)));
    env_->bytes_written_.fetch_add(w);
    return w;
  }
  absl::Status Truncate(uint64_t size) override { return base_->Truncate(size); }
  absl::Status DataSync() override {
    RETURN_IF_ERROR(env_->BeforeSync());
    env_->data_syncs_.fetch_add(1);
    return base_->DataSync();
  }
  absl::StatusOr<uint64_t> Size() const override { return base_->Size(); }
  void StartWriteback(uint64_t offset, uint64_t len) override { base_->StartWriteback(offset, len); }
  void DropCached(uint64_t offset, uint64_t len) override {
    env_->BeforeDrop();
    base_->DropCached(offset, len);
  }

 private:
  FaultEnv* const env_;
  std::shared_ptr<File> base_;
};

absl::StatusOr<std::shared_ptr<File>> FaultEnv::Open(const std::string& path, bool create) {
  ASSIGN_OR_RETURN(std::shared_ptr<File> f, base_->Open(path, create));
  return std::shared_ptr<File>(std::make_shared<FaultFile>(this, std::move(f)));
}

size_t FaultEnv::Admit(size_t n, bool* enospc) {
  size_t chunk = max_chunk_.load();
  if (chunk > 0 && n > chunk) n = chunk;
  MutexLock lock(mu_);
  if (budget_ < 0 || n == 0) return n;
  if (budget_ == 0) {
    *enospc = true;
    return 0;
  }
  size_t allowed = std::min<uint64_t>(n, budget_);
  budget_ -= allowed;
  return allowed;
}

absl::Status FaultEnv::BeforeSync() {
  std::function<absl::Status()> hook;
  {
    MutexLock lock(mu_);
    hook = sync_hook_;
  }
  return hook ? hook() : absl::OkStatus();
}

void FaultEnv::BeforeDrop() {
  std::function<void()> hook;
  {
    MutexLock lock(mu_);
    hook = drop_hook_;
  }
  if (hook) hook();
}

}  // namespace kelp::volume
