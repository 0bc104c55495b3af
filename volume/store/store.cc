#include "volume/store/store.h"

#include <algorithm>
#include <cerrno>

#include "shared/log.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::volume {

bool ParseVolumeFileBase(std::string_view base, std::string* collection, uint32_t* id) {
  size_t us = base.rfind('_');
  std::string_view num = us == std::string_view::npos ? base : base.substr(us + 1);
  if (!kelp::ParseInt(num, id) || *id == 0) return false;
  *collection = us == std::string_view::npos ? "" : std::string(base.substr(0, us));
  return us == std::string_view::npos || us > 0;
}

Store::Store(Options options)
    : opts_(std::move(options)),
      env_(opts_.env ? opts_.env : Env::Default()),
      size_limit_(opts_.volume_size_limit) {}

absl::Status Store::Load() {
  RETURN_IF_ERROR(env_->CreateDir(opts_.dir));
  ASSIGN_OR_RETURN(std::vector<std::string> names, env_->ListDir(opts_.dir));
  std::sort(names.begin(), names.end());
  uint64_t limit = volume_size_limit();
  for (const std::string& name : names) {
    std::string_view n = name;
    if (n.size() <= 4 || n.substr(n.size() - 4) != ".dat") continue;
    std::string collection;
    uint32_t id;
    if (!ParseVolumeFileBase(n.substr(0, n.size() - 4), &collection, &id)) continue;
    auto v = Volume::Open(Volume::Options{opts_.dir, id, collection, "000", limit, env_});
    if (!v.ok()) {
      spdlog::error("volume {}: cannot open {}: {}", id, name, v.status());
      continue;
    }
    WriterLock l(mu_);
    if (volumes_.contains(id)) {
      spdlog::error("volume {}: {} duplicates an id already loaded; skipped", id, name);
      continue;
    }
    volumes_.emplace(id, std::shared_ptr<Volume>(std::move(*v)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<Volume>> Store::Allocate(uint32_t id, const std::string& collection,
                                                        const std::string& replication) {
  uint64_t limit;
  {
    WriterLock l(mu_);
    if (auto it = volumes_.find(id); it != volumes_.end()) {
      if (it->second->collection() == collection) return it->second;
      return PosixError(EEXIST, kelp::StrCat("volume ", id, " exists in collection \"",
                                             it->second->collection(), "\""));
    }
    if (creating_.contains(id))
      return absl::UnavailableError(kelp::StrCat("volume ", id, " is being created"));
    if (volumes_.size() + creating_.size() >= opts_.max_volumes) {
      return PosixError(
          ENOSPC, kelp::StrCat("this server holds its maximum of ", opts_.max_volumes, " volumes"));
    }
    creating_.insert(id);
    limit = size_limit_;
  }
  // Creating the files ends with an fdatasync: done outside the lock, which every request
  // takes to find its volume.
  auto v = Volume::Create(Volume::Options{opts_.dir, id, collection, replication, limit, env_});
  WriterLock l(mu_);
  creating_.erase(id);
  if (!v.ok()) return v.status();
  std::shared_ptr<Volume> shared(std::move(*v));
  shared->SetSizeLimit(size_limit_);  // in case it changed meanwhile
  volumes_.emplace(id, shared);
  spdlog::info("volume {}: allocated (collection \"{}\", replication {})", id, collection,
               replication);
  return shared;
}

std::shared_ptr<Volume> Store::Get(uint32_t id) const {
  ReaderLock l(mu_);
  auto it = volumes_.find(id);
  return it == volumes_.end() ? nullptr : it->second;
}

absl::Status Store::Delete(uint32_t id) {
  std::shared_ptr<Volume> v;
  {
    WriterLock l(mu_);
    auto it = volumes_.find(id);
    if (it == volumes_.end()) return PosixError(ENOENT, kelp::StrCat("volume ", id, " not found"));
    v = std::move(it->second);
    volumes_.erase(it);
  }
  spdlog::info("volume {}: deleted", id);
  return v->Destroy();
}

std::vector<std::shared_ptr<Volume>> Store::List() const {
  std::vector<std::shared_ptr<Volume>> out;
  {
    ReaderLock l(mu_);
    out.reserve(volumes_.size());
    for (const auto& [id, v] : volumes_) out.push_back(v);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a->id() < b->id(); });
  return out;
}

void Store::SetVolumeSizeLimit(uint64_t bytes) {
  WriterLock l(mu_);
  uint64_t limit = bytes == 0 ? opts_.volume_size_limit : std::min(bytes, opts_.volume_size_limit);
  if (limit == size_limit_) return;
  size_limit_ = limit;
  for (auto& [id, v] : volumes_) v->SetSizeLimit(limit);
}

uint64_t Store::volume_size_limit() const {
  ReaderLock l(mu_);
  return size_limit_;
}

}  // namespace kelp::volume
