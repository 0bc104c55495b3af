#include "volume/client/blob_client.h"

#include <cerrno>
#include <cstring>
#include <set>
#include <vector>

#include "shared/log.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::volume {
namespace {

std::string UrlOf(const cluster::Location& l) { return l.url().empty() ? l.public_url() : l.url(); }

// A server on this machine: "127.x.x.x:port", "localhost:port" or "[::1]:port".
bool OnLoopback(std::string_view url) {
  std::string_view host = url.substr(0, url.rfind(':'));
  return host.substr(0, 4) == "127." || host == "localhost" || host == "[::1]";
}

// Failures another volume or server cannot fix: not worth a fresh assignment.
bool Retryable(const absl::Status& s) {
  switch (ErrnoOf(s)) {
    case EFBIG:  // over the volume servers' size limit, everywhere
    case EINVAL:
      return false;
    default:
      return true;
  }
}

}  // namespace

BlobClient::BlobClient(Coordinator coordinator, VolumeClient* client, Options options)
    : coord_(std::move(coordinator)), client_(client), opts_(std::move(options)) {
  auto& reg = MetricsRegistry::Default();
  const std::string& p = opts_.metric_prefix;
  put_bytes_ = reg.GetCounter(p + "_put_bytes_total", "Bytes uploaded to volume servers.");
  get_bytes_ = reg.GetCounter(p + "_get_bytes_total", "Bytes read from volume servers.");
  put_retries_ = reg.GetCounter(p + "_put_retries_total", "Uploads retried on a fresh assignment.");
  get_failovers_ = reg.GetCounter(p + "_get_failovers_total", "Reads that failed on one replica.");
  syncs_ = reg.GetCounter(p + "_syncs_total", "Volume sync requests (fsync of data uploaded lazily).");
  local_reads_ = reg.GetCounter(p + "_local_reads_total",
                                "Whole blobs read straight from a local volume's file.");
  local_read_bytes_ = reg.GetCounter(p + "_local_read_bytes_total",
                                     "Bytes read straight from local volumes' files.");
  local_fallbacks_ = reg.GetCounter(p + "_local_read_fallbacks_total",
                                    "Local reads that failed and went to the server over HTTP.");
  if (opts_.local_reads) local_reader_ = std::make_unique<LocalReader>(client_);
}

absl::StatusOr<BlobClient::Assigned> BlobClient::NextFid() {
  {
    MutexLock lock(mu_);
    if (pool_next_ < pool_count_) {
      FileId f = pool_base_;
      f.key += pool_next_++;
      return Assigned{f, pool_urls_, pool_auth_};
    }
  }
  cluster::AssignRequest req;
  req.set_count(std::max<uint32_t>(1, opts_.assign_batch));
  req.set_replication(opts_.replication);
  req.set_collection(opts_.collection);
  auto a = coord_.assign(req);
  if (!a.ok()) {
    // Nothing to retry on: no writable volume (ENOSPC) or the coordinator is not there.
    absl::Status s = a.status();
    if (ErrnoOf(s) == ENOSPC || s.code() == absl::StatusCode::kResourceExhausted) {
      return PosixError(ENOSPC, kelp::StrCat("assign: ", s.message()));
    }
    return PosixError(EIO, kelp::StrCat("assign: ", s.message()));
  }
  ASSIGN_OR_RETURN(FileId base, FileId::Parse(a->fid()));
  std::vector<std::string> urls;
  for (const auto& l : a->locations()) urls.push_back(UrlOf(l));
  if (urls.empty()) return PosixError(EIO, "assign returned no volume server");
  MutexLock lock(mu_);
  pool_base_ = base;
  pool_count_ = a->count() == 0 ? 1 : a->count();
  pool_next_ = 1;
  pool_urls_ = urls;
  pool_auth_ = a->auth();
  locations_[base.volume_id] = Locations{urls, std::chrono::steady_clock::now()};
  return Assigned{base, std::move(urls), a->auth()};
}

void BlobClient::DropPool() {
  MutexLock lock(mu_);
  pool_next_ = pool_count_ = 0;
}

absl::StatusOr<std::string> BlobClient::Put(std::string_view data, bool fsync) {
  absl::Status last;
  // Servers that failed this upload: the coordinator takes a server for dead only after its
  // heartbeats stop for a while, so until then it may assign the same one again; a retry asks
  // for another assignment (a few times) rather than try a frozen or dying server twice.
  std::set<std::string> failed;
  for (int attempt = 0; attempt < std::max(1, opts_.put_attempts); ++attempt) {
    if (attempt > 0) put_retries_->Inc();
    ASSIGN_OR_RETURN(Assigned a, NextFid());
    for (int reassign = 0; reassign < kReassigns && failed.count(a.urls.front()); ++reassign) {
      DropPool();
      ASSIGN_OR_RETURN(a, NextFid());
    }
    std::string fid = a.fid.ToString();
    // An expired token is a 401 here, and the retry takes a fresh assignment.
    auto up = client_->Upload(a.urls.front(), fid, data, fsync, a.auth);
    if (up.ok()) {
      put_bytes_->Inc(data.size());
      return fid;
    }
    last = up.status();
    spdlog::warn("upload of {} bytes as {} to {} failed (attempt {}): {}", data.size(), fid, a.urls.front(),
                 attempt + 1, last);
    DropPool();
    failed.insert(a.urls.front());
    if (!Retryable(last)) break;
  }
  int err = ErrnoOf(last);
  return PosixError(err == ENOSPC || err == EFBIG || err == EDQUOT ? err : EIO, ToStd(last.message()));
}

absl::StatusOr<std::vector<std::string>> BlobClient::LocationsOf(uint32_t volume_id, bool refresh) {
  if (!refresh) {
    MutexLock lock(mu_);
    auto it = locations_.find(volume_id);
    if (it != locations_.end() && std::chrono::steady_clock::now() - it->second.fetched < opts_.location_ttl) {
      return it->second.urls;
    }
  }
  cluster::LookupVolumeRequest req;
  req.add_volume_ids(volume_id);
  auto r = coord_.lookup(req);
  if (!r.ok()) return PosixError(EIO, kelp::StrCat("lookup of volume ", volume_id, ": ", r.status().message()));
  std::vector<std::string> urls;
  for (const auto& v : r->volumes()) {
    if (v.volume_id() != volume_id) continue;
    for (const auto& l : v.locations()) urls.push_back(UrlOf(l));
  }
  if (urls.empty()) return PosixError(EIO, kelp::StrCat("volume ", volume_id, " has no live server"));
  MutexLock lock(mu_);
  locations_[volume_id] = Locations{urls, std::chrono::steady_clock::now()};
  return urls;
}

std::string BlobClient::LocalReplica(const std::vector<std::string>& urls) {
  MutexLock lock(mu_);
  for (const std::string& u : urls) {
    if (OnLoopback(u) && LocalStateLocked(u) != Local::kNo) return u;
  }
  return "";
}

BlobClient::Local BlobClient::LocalStateLocked(const std::string& url) {
  auto it = local_state_.find(url);
  if (it == local_state_.end()) return Local::kUntried;
  if (it->second.state == Local::kNo &&
      it->second.retry_after != std::chrono::steady_clock::time_point{} &&
      std::chrono::steady_clock::now() >= it->second.retry_after) {
    local_state_.erase(it);
    return Local::kUntried;
  }
  return it->second.state;
}

void BlobClient::NoteLocal(const std::string& url, const absl::Status& s) {
  LocalState state;
  if (s.ok()) {
    state.state = Local::kYes;
  } else if (ErrnoOf(s) == EROFS || s.code() == absl::StatusCode::kPermissionDenied ||
             s.code() == absl::StatusCode::kUnimplemented) {
    state.state = Local::kNo;
    spdlog::info("reading blobs of {} over HTTP, not from its files: {}", url, s);
  } else if (s.code() == absl::StatusCode::kUnavailable || s.code() == absl::StatusCode::kAborted) {
    // Not answering, or its needles not where it says in the file this process opens (a
    // vacuum twice in a row, or another machine's file of that name): over HTTP (where its
    // failures show) for a while.
    state.state = Local::kNo;
    state.retry_after = std::chrono::steady_clock::now() + kLocalRetry;
  } else {
    return;
  }
  MutexLock lock(mu_);
  local_state_[url] = state;
}

bool BlobClient::ReadsLocally(std::string_view fid) {
  if (local_reader_ == nullptr) return false;
  auto id = FileId::Parse(fid);
  if (!id.ok()) return false;
  auto urls = LocationsOf(id->volume_id, false);
  if (!urls.ok()) return false;
  for (const std::string& u : *urls) {
    if (!OnLoopback(u)) continue;
    Local state;
    {
      MutexLock lock(mu_);
      state = LocalStateLocked(u);
    }
    if (state == Local::kYes) return true;
    if (state == Local::kNo) continue;
    absl::Status s = local_reader_->Probe(u, fid);
    NoteLocal(u, s);
    if (s.ok()) return true;
  }
  return false;
}

absl::Status BlobClient::Get(std::string_view fid, uint64_t offset, uint64_t length, const ByteSink& sink) {
  if (length == 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(FileId id, FileId::Parse(fid));
  // A server the local read could not reach: the first HTTP round leaves it out (a stopped
  // server would cost the read its timeout twice).
  std::string unreachable;
  absl::Status last = PosixError(EIO, "no replica");
  if (local_reader_ != nullptr && offset == 0) {
    auto urls = LocationsOf(id.volume_id, false);
    std::string url = urls.ok() ? LocalReplica(*urls) : "";
    if (!url.empty()) {
      std::string own;  // when the sink names no buffer to read into
      char* dst = sink.into;
      if (dst == nullptr || sink.into_size < length) {
        own.resize(length);
        dst = own.data();
      }
      absl::Status s = local_reader_->Read(url, fid, dst, length);
      NoteLocal(url, s);
      if (s.ok()) {
        local_reads_->Inc();
        local_read_bytes_->Inc(length);
        return sink(std::string_view(dst, length));
      }
      // A part of a blob (FailedPrecondition) is read over HTTP, as is anything that failed;
      // a blob the server does not have may be on another replica.
      if (s.code() != absl::StatusCode::kFailedPrecondition && ErrnoOf(s) != ENOENT) {
        local_fallbacks_->Inc();
        spdlog::warn("local read of {} from {}'s file failed, reading it over HTTP: {}", fid, url,
                     s);
      }
      if (s.code() == absl::StatusCode::kUnavailable) {
        unreachable = url;
        last = s;
      }
    }
  }
  uint64_t done = 0;  // bytes the sink took: a second round goes on from there
  absl::Status sink_error;
  for (int round = 0; round < 2; ++round) {
    auto urls = LocationsOf(id.volume_id, round > 0);
    if (!urls.ok()) {
      last = urls.status();
      continue;
    }
    if (round == 0 && !unreachable.empty()) {
      std::erase(*urls, unreachable);
      if (urls->empty()) continue;
    }
    int failovers = 0;
    absl::Status s = ReadWithFailover(
        *urls, offset + done, length - done,
        [&](const std::string& url, uint64_t off, uint64_t len, const ByteSink& piece_sink) {
          absl::Status r = client_->Read(url, fid, off, len, piece_sink);
          if (!r.ok())
            spdlog::warn("read of {} [{}, +{}) from {} failed: {}", fid, off, len, url, r);
          return r;
        },
        ByteSink(
            [&](std::string_view piece) {
              sink_error = sink(piece);
              if (sink_error.ok()) done += piece.size();
              return sink_error;
            },
            sink.into_after(done), sink.into_size_after(done)),
        &failovers);
    get_failovers_->Inc(failovers);
    if (s.ok()) {
      get_bytes_->Inc(length);
      return s;
    }
    if (!sink_error.ok()) return sink_error;
    last = s;
  }
  return PosixError(ErrnoOf(last) == ENOENT ? ENOENT : EIO, ToStd(last.message()));
}

absl::Status BlobClient::SyncVolumes(const std::vector<uint32_t>& volume_ids) {
  // One request per server: the volumes grouped by their first known holder.
  std::map<std::string, std::vector<uint32_t>> by_url;
  for (uint32_t vid : volume_ids) {
    ASSIGN_OR_RETURN(std::vector<std::string> urls, LocationsOf(vid, false));
    by_url[urls.front()].push_back(vid);
  }
  for (const auto& [url, vids] : by_url) {
    syncs_->Inc();
    absl::Status s = client_->Sync(url, vids);
    if (s.ok()) continue;
    spdlog::warn("sync of volumes on {} failed: {}; trying every holder", url, s);
    for (uint32_t vid : vids) {
      absl::Status last = s;
      bool done = false;
      for (int round = 0; round < 2 && !done; ++round) {
        auto urls = LocationsOf(vid, true);
        if (!urls.ok()) {
          last = urls.status();
          continue;
        }
        for (const std::string& u : *urls) {
          syncs_->Inc();
          last = client_->Sync(u, {vid});
          if (last.ok()) {
            done = true;
            break;
          }
        }
      }
      if (!done) return PosixError(EIO, kelp::StrCat("sync of volume ", vid, ": ", last.message()));
    }
  }
  return absl::OkStatus();
}

void BlobClient::Discard(const std::vector<std::string>& fids) {
  if (fids.empty()) return;
  if (!coord_.delete_blobs) {
    spdlog::warn("{} uncommitted blobs left for filer.fsck to find", fids.size());
    return;
  }
  auto results = coord_.delete_blobs(fids);
  for (size_t i = 0; i < results.size() && i < fids.size(); ++i) {
    if (!results[i].ok()) spdlog::warn("could not delete uncommitted blob {}: {}", fids[i], results[i]);
  }
}

absl::Status ReadWithFailover(const std::vector<std::string>& urls, uint64_t offset, uint64_t length,
                              const RangeReader& read, const ByteSink& sink, int* failovers) {
  uint64_t done = 0;  // bytes the sink took
  absl::Status sink_error;
  absl::Status last = PosixError(EIO, "blob has no replica to read from");
  for (const auto& url : urls) {
    absl::Status s = read(url, offset + done, length - done,
                          ByteSink(
                              [&](std::string_view piece) {
                                piece = piece.substr(0, length - done);
                                sink_error = sink(piece);
                                if (sink_error.ok()) done += piece.size();
                                return sink_error;
                              },
                              sink.into_after(done), sink.into_size_after(done)));
    if (!sink_error.ok()) return sink_error;
    if (s.ok() && done == length) return s;
    if (s.ok()) s = PosixError(EIO, kelp::StrCat("replica ", url, " sent ", length - done, " bytes too few"));
    ++*failovers;
    last = s;
  }
  return last;
}

}  // namespace kelp::volume
