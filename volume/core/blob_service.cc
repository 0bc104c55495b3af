#include "volume/core/blob_service.h"

#include <algorithm>
#include <cerrno>
#include <mutex>

#include "shared/log.h"
#include "shared/mutex.h"
#include "shared/security/jwt.h"
#include "shared/security/security.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::volume {

BlobService::BlobService(Store* store, LocationProvider* locations, http::HttpClient* client,
                         ThreadPool* fanout)
    : store_(store), locations_(locations), client_(client), fanout_(fanout) {}

void BlobService::SetSelfUrls(std::vector<std::string> urls) {
  MutexLock l(mu_);
  self_urls_ = std::move(urls);
}

bool BlobService::IsSelf(const std::string& url) const {
  MutexLock l(mu_);
  return std::find(self_urls_.begin(), self_urls_.end(), url) != self_urls_.end();
}

absl::StatusOr<std::shared_ptr<Volume>> BlobService::GetVolume(uint32_t vid) const {
  std::shared_ptr<Volume> v = store_->Get(vid);
  if (!v) return PosixError(ENOENT, kelp::StrCat("volume ", vid, " is not on this server"));
  return v;
}

bool BlobService::Replicated(uint32_t vid) const {
  std::shared_ptr<Volume> v = store_->Get(vid);
  return v && v->copies() > 1;
}

absl::StatusOr<Volume::WriteResult> BlobService::Write(const FileId& fid, std::string_view data,
                                                       bool fsync, bool from_client) {
  ASSIGN_OR_RETURN(std::shared_ptr<Volume> v, GetVolume(fid.volume_id));
  const bool replicate = from_client && v->copies() > 1;
  const bool existed = replicate && v->SizeOf(fid.key).has_value();
  ASSIGN_OR_RETURN(Volume::WriteResult r, v->Write(fid.key, fid.cookie, data, fsync));
  if (r.sync_behind)
    fanout_->TrySubmit([v] { v->SyncBehind(); });  // a full pool: the next step asks
  if (replicate) {
    absl::Status s = Forward(*v, fid, "PUT", data, fsync);
    if (!s.ok()) {
      // Not acknowledged: take a new needle back rather than leave an orphan here (an
      // overwrite stays, the previous version being gone already).
      if (!existed) (void)v->Delete(fid.key, fid.cookie);
      return s;
    }
  }
  return r;
}

absl::StatusOr<uint32_t> BlobService::Delete(const FileId& fid, bool fsync, bool from_client) {
  ASSIGN_OR_RETURN(std::shared_ptr<Volume> v, GetVolume(fid.volume_id));
  absl::StatusOr<uint32_t> local = v->Delete(fid.key, fid.cookie, fsync);
  if (!local.ok() && ErrnoOf(local.status()) != ENOENT) return local.status();
  if (from_client && v->copies() > 1) {
    // Forward even when absent here, so replicas converge; they answer 404 when absent too.
    RETURN_IF_ERROR(Forward(*v, fid, "DELETE", {}, fsync));
  }
  return local;
}

absl::StatusOr<std::vector<std::string>> BlobService::ReplicaTargets(const Volume& v,
                                                                     bool refresh) {
  if (locations_ == nullptr) {
    return absl::UnavailableError(
        kelp::StrCat("volume ", v.id(), " keeps ", v.copies(),
                     " copies but this server knows no filer to find them"));
  }
  if (refresh) locations_->Invalidate(v.id());
  ASSIGN_OR_RETURN(std::vector<std::string> urls, locations_->Lookup(v.id()));
  std::vector<std::string> targets;
  for (const std::string& u : urls) {
    if (!IsSelf(u) && std::find(targets.begin(), targets.end(), u) == targets.end())
      targets.push_back(u);
  }
  if (static_cast<int>(targets.size()) < v.copies() - 1) {
    return absl::UnavailableError(kelp::StrCat("volume ", v.id(), " needs ", v.copies() - 1,
                                               " replicas, ", targets.size(),
                                               " are known alive"));
  }
  return targets;
}

absl::Status BlobService::Forward(const Volume& v, const FileId& fid, std::string_view method,
                                  std::string_view body, bool fsync) {
  std::string path =
      kelp::StrCat("/", fid.ToString(), "?type=replicate", fsync ? "&fsync=true" : "");
  // Replicas check tokens like any client's: this server holds the same signing key.
  http::Headers headers;
  if (auto sec = security::Current(); sec->volume_write.enabled()) {
    headers.Set("Authorization", "Bearer " + security::SignFileIdToken(sec->volume_write, fid, 1));
  }
  absl::Status last;
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto targets = ReplicaTargets(v, attempt > 0);
    if (!targets.ok()) {
      last = targets.status();
      if (locations_ == nullptr) return last;
      continue;
    }
    last = ForwardOnce(v, *targets, method, path, headers, body);
    if (last.ok()) return last;
  }
  spdlog::warn("volume {}: replicating {} {} failed: {}", v.id(), method, fid.ToString(), last);
  return absl::UnavailableError(kelp::StrCat("replication failed: ", ToStd(last.message())));
}

absl::Status BlobService::ForwardOnce(const Volume& v, const std::vector<std::string>& targets,
                                      std::string_view method, const std::string& target_path,
                                      const http::Headers& headers, std::string_view body) {
  std::vector<std::function<absl::Status()>> sends;
  for (const std::string& url : targets) {
    sends.push_back([&, url]() -> absl::Status {
      auto resp = client_->Do(method, url, target_path, headers, body);
      if (!resp.ok()) return resp.status();
      int st = resp->status;
      bool ok =
          method == "DELETE" ? (st == 202 || st == 200 || st == 404) : (st == 201 || st == 200);
      if (ok) return absl::OkStatus();
      return absl::UnavailableError(
          kelp::StrCat("replica ", url, " answered ", st, ": ", resp->body));
    });
  }
  return RunAll(sends);
}

absl::Status BlobService::RunAll(const std::vector<std::function<absl::Status()>>& tasks) {
  if (tasks.empty()) return absl::OkStatus();
  Mutex mu;
  CondVar cv;
  size_t pending = tasks.size() - 1;
  absl::Status first_error;
  auto record = [&](absl::Status s) {
    MutexLock l(mu);
    if (!s.ok() && first_error.ok()) first_error = std::move(s);
  };
  for (size_t i = 0; i + 1 < tasks.size(); ++i) {
    bool queued = fanout_->Submit([&, i] {
      absl::Status s = tasks[i]();
      MutexLock l(mu);
      if (!s.ok() && first_error.ok()) first_error = std::move(s);
      if (--pending == 0) cv.NotifyAll();
    });
    if (!queued) {
      record(absl::UnavailableError("server stopping"));
      MutexLock l(mu);
      if (--pending == 0) cv.NotifyAll();
    }
  }
  record(tasks.back()());
  MutexLock l(mu);
  while (pending != 0) cv.Wait(l);
  return first_error;
}

absl::Status BlobService::SyncVolumes(const std::vector<uint32_t>& vids, bool from_client) {
  std::vector<std::shared_ptr<Volume>> volumes;
  for (uint32_t vid : vids) {
    ASSIGN_OR_RETURN(std::shared_ptr<Volume> v, GetVolume(vid));
    if (std::find(volumes.begin(), volumes.end(), v) == volumes.end()) volumes.push_back(v);
  }
  std::vector<std::function<absl::Status()>> tasks;
  for (const auto& v : volumes) tasks.push_back([v] { return v->Sync(); });
  if (from_client) {
    // Replicated volumes: every other holder syncs its copy too.
    for (const auto& v : volumes) {
      if (v->copies() <= 1) continue;
      tasks.push_back([this, v]() -> absl::Status {
        std::string path = kelp::StrCat("/sync?volumes=", v->id(), "&type=replicate");
        absl::Status last;
        for (int attempt = 0; attempt < 2; ++attempt) {
          auto targets = ReplicaTargets(*v, attempt > 0);
          if (!targets.ok()) {
            last = targets.status();
            if (locations_ == nullptr) break;
            continue;
          }
          last = ForwardOnce(*v, *targets, "POST", path, {}, {});
          if (last.ok()) return last;
        }
        spdlog::warn("volume {}: syncing the replicas failed: {}", v->id(), last);
        return absl::UnavailableError(kelp::StrCat("replica sync failed: ", ToStd(last.message())));
      });
    }
  }
  return RunAll(tasks);
}

std::vector<BlobService::DeleteResult> BlobService::BatchDelete(
    const std::vector<std::string>& fids) {
  std::vector<DeleteResult> out;
  out.reserve(fids.size());
  for (const std::string& f : fids) {
    DeleteResult r;
    r.fid = f;
    auto fid = FileId::Parse(f);
    if (!fid.ok()) {
      r.status = 400;
      r.error = std::string(fid.status().message());
      out.push_back(std::move(r));
      continue;
    }
    auto d = Delete(*fid, false, false);
    if (d.ok()) {
      r.size = *d;
    } else {
      r.status = HttpStatusOf(d.status());
      r.error = std::string(d.status().message());
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace kelp::volume
