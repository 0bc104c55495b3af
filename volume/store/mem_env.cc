#include "volume/store/mem_env.h"

#include <cerrno>
#include <cstring>

#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::volume {

class MemEnv::MemFile : public File {
 public:
  explicit MemFile(std::string content = {}) : data_(std::move(content)) {}

  absl::StatusOr<size_t> ReadAt(uint64_t offset, size_t n, char* buf) const override {
    MutexLock l(mu_);
    if (offset >= data_.size()) return 0;
    size_t take = std::min<uint64_t>(n, data_.size() - offset);
    std::memcpy(buf, data_.data() + offset, take);
    return take;
  }
  absl::StatusOr<size_t> WriteAt(uint64_t offset, std::string_view data) override {
    MutexLock l(mu_);
    if (offset > (1ull << 32)) return PosixError(EFBIG, "in-memory file too large");
    if (data_.size() < offset + data.size()) data_.resize(offset + data.size());
    std::memcpy(data_.data() + offset, data.data(), data.size());
    return data.size();
  }
  absl::Status Truncate(uint64_t size) override {
    MutexLock l(mu_);
    if (size > (1ull << 32)) return PosixError(EFBIG, "in-memory file too large");
    data_.resize(size);
    return absl::OkStatus();
  }
  absl::Status DataSync() override { return absl::OkStatus(); }
  absl::StatusOr<uint64_t> Size() const override {
    MutexLock l(mu_);
    return data_.size();
  }

 private:
  mutable Mutex mu_;
  std::string data_ ABSL_GUARDED_BY(mu_);
};

absl::StatusOr<std::shared_ptr<File>> MemEnv::Open(const std::string& path, bool create) {
  MutexLock l(mu_);
  auto it = files_.find(path);
  if (it != files_.end()) return std::shared_ptr<File>(it->second);
  if (!create) return PosixError(ENOENT, kelp::StrCat("open ", path, ": no such file"));
  auto f = std::make_shared<MemFile>();
  files_[path] = f;
  return std::shared_ptr<File>(f);
}

bool MemEnv::Exists(const std::string& path) {
  MutexLock l(mu_);
  return files_.count(path) > 0;
}

absl::Status MemEnv::Rename(const std::string& from, const std::string& to) {
  MutexLock l(mu_);
  auto it = files_.find(from);
  if (it == files_.end()) return PosixError(ENOENT, kelp::StrCat("rename ", from, ": no such file"));
  files_[to] = it->second;
  files_.erase(from);
  return absl::OkStatus();
}

absl::Status MemEnv::Remove(const std::string& path) {
  MutexLock l(mu_);
  files_.erase(path);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> MemEnv::ListDir(const std::string& dir) {
  MutexLock l(mu_);
  std::vector<std::string> names;
  std::string prefix = dir.empty() || dir.back() == '/' ? dir : dir + "/";
  for (const auto& [path, f] : files_) {
    if (path.compare(0, prefix.size(), prefix) != 0) continue;
    std::string rest = path.substr(prefix.size());
    if (!rest.empty() && rest.find('/') == std::string::npos) names.push_back(rest);
  }
  return names;
}

void MemEnv::WriteFile(const std::string& path, std::string content) {
  MutexLock l(mu_);
  files_[path] = std::make_shared<MemFile>(std::move(content));
}

}  // namespace kelp::volume
