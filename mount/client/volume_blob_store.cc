#include "mount/client/volume_blob_store.h"

#include <cerrno>
#include <cstring>

#include "shared/log.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::mount {
namespace {

std::string UrlOf(const cluster::Location& l) { return l.url().empty() ? l.public_url() : l.url(); }

// The errno an HTTP answer of a volume server stands for.
absl::Status StatusOfHttp(int status, std::string_view what, std::string_view body) {
  std::string msg = kelp::StrCat(what, ": HTTP ", status);
  if (!body.empty()) kelp::StrAppend(&msg, " ", body.substr(0, 200));
  if (status == 507) return PosixError(ENOSPC, msg);
  if (status == 413) return PosixError(EFBIG, msg);  // over the volume server's -fileSizeLimitMB
  return PosixError(EIO, msg);
}

}  // namespace

VolumeBlobStore::VolumeBlobStore(filer::FilerClient* meta, http::HttpClient* http, Options options)
    : meta_(meta), http_(http), opts_(std::move(options)) {
  auto& reg = MetricsRegistry::Default();
  put_bytes_ = reg.GetCounter("kelp_mount_blob_put_bytes_total", "bytes uploaded to volume servers");
  get_bytes_ = reg.GetCounter("kelp_mount_blob_get_bytes_total", "bytes read from volume servers");
  put_errors_ = reg.GetCounter("kelp_mount_blob_put_errors_total", "failed blob uploads (attempts)");
  get_errors_ = reg.GetCounter("kelp_mount_blob_get_errors_total", "failed blob reads (per replica)");
  syncs_ = reg.GetCounter("kelp_mount_volume_syncs_total", "volume sync requests (fsync of files written lazily)");
}

absl::StatusOr<VolumeBlobStore::Assigned> VolumeBlobStore::NextFid() {
  {
    std::lock_guard lock(mu_);
    if (pool_next_ < pool_count_) {
      FileId f = pool_base_;
      f.key += pool_next_++;
      return Assigned{f, pool_urls_};
    }
  }
  cluster::AssignRequest req;
  req.set_count(opts_.assign_batch);
  req.set_replication(opts_.replication);
  req.set_collection(opts_.collection);
  ASSIGN_OR_RETURN(auto a, meta_->Assign(req));
  ASSIGN_OR_RETURN(FileId base, FileId::Parse(a.fid()));
  std::vector<std::string> urls;
  for (const auto& l : a.locations()) urls.push_back(UrlOf(l));
  if (urls.empty()) return PosixError(EIO, "assign returned no volume server");
  uint32_t count = a.count() == 0 ? 1 : a.count();
  std::lock_guard lock(mu_);
  pool_base_ = base;
  pool_count_ = count;
  pool_next_ = 1;
  pool_urls_ = urls;
  std::vector<std::string> copy = pool_urls_;
  locations_[base.volume_id] = Locations{std::move(copy), std::chrono::steady_clock::now()};
  return Assigned{base, std::move(urls)};
}

void VolumeBlobStore::DropPool() {
  std::lock_guard lock(mu_);
  pool_next_ = pool_count_ = 0;
}

absl::StatusOr<std::string> VolumeBlobStore::Put(std::string_view data, bool fsync) {
  absl::Status last;
  for (int attempt = 0; attempt < opts_.put_attempts; ++attempt) {
    auto a = NextFid();
    if (!a.ok()) {
      // The filer could not assign (no writable volume, filer gone): nothing to retry on.
      absl::Status s = a.status();
      if (ErrnoOf(s) == ENOSPC) return s;
      return PosixError(s.code() == absl::StatusCode::kResourceExhausted ? ENOSPC : EIO,
                        kelp::StrCat("assign: ", s.message()));
    }
    std::string fid = a->fid.ToString();
    std::string target = kelp::StrCat("/", fid, fsync ? "?fsync=true" : "");
    http::Headers h;
    h.Set("Content-Type", "application/octet-stream");
    auto r = http_->Do("PUT", a->urls.front(), target, h, data);
    if (r.ok() && r->status >= 200 && r->status < 300) {
      put_bytes_->Inc(data.size());
      return fid;
    }
    put_errors_->Inc();
    last = r.ok() ? StatusOfHttp(r->status, kelp::StrCat("PUT ", a->urls.front(), target), r->body)
                  : PosixError(EIO, kelp::StrCat("PUT ", a->urls.front(), target, ": ", r.status().message()));
    spdlog::warn("upload of {} bytes failed (attempt {}): {}", data.size(), attempt + 1, last);
    DropPool();
  }
  return last;
}

absl::Status VolumeBlobStore::SyncOn(const std::string& url, const std::vector<uint32_t>& volume_ids) {
  std::string target = "/sync?volumes=";
  for (size_t i = 0; i < volume_ids.size(); ++i) kelp::StrAppend(&target, i ? "," : "", volume_ids[i]);
  syncs_->Inc();
  auto r = http_->Do("POST", url, target, {}, {});
  if (!r.ok()) return PosixError(EIO, kelp::StrCat("POST ", url, target, ": ", r.status().message()));
  if (r->status != 200) return StatusOfHttp(r->status, kelp::StrCat("POST ", url, target), r->body);
  return absl::OkStatus();
}

absl::Status VolumeBlobStore::SyncVolumes(const std::vector<uint32_t>& volume_ids) {
  // One request per server: the volumes grouped by their first known holder.
  std::map<std::string, std::vector<uint32_t>> by_url;
  for (uint32_t vid : volume_ids) {
    ASSIGN_OR_RETURN(std::vector<std::string> urls, LocationsOf(vid, false));
    by_url[urls.front()].push_back(vid);
  }
  for (const auto& [url, vids] : by_url) {
    absl::Status s = SyncOn(url, vids);
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
          last = SyncOn(u, {vid});
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

absl::StatusOr<std::vector<std::string>> VolumeBlobStore::LocationsOf(uint32_t volume_id, bool refresh) {
  if (!refresh) {
    std::lock_guard lock(mu_);
    auto it = locations_.find(volume_id);
    if (it != locations_.end() &&
        std::chrono::steady_clock::now() - it->second.fetched < std::chrono::seconds(opts_.location_ttl_s)) {
      return it->second.urls;
    }
  }
  cluster::LookupVolumeRequest req;
  req.add_volume_ids(volume_id);
  auto r = meta_->LookupVolume(req);
  if (!r.ok()) return PosixError(EIO, kelp::StrCat("lookup volume ", volume_id, ": ", r.status().message()));
  std::vector<std::string> urls;
  for (const auto& v : r->volumes()) {
    if (v.volume_id() != volume_id) continue;
    for (const auto& l : v.locations()) urls.push_back(UrlOf(l));
  }
  if (urls.empty()) return PosixError(EIO, kelp::StrCat("volume ", volume_id, " has no live server"));
  std::lock_guard lock(mu_);
  locations_[volume_id] = Locations{urls, std::chrono::steady_clock::now()};
  return urls;
}

absl::Status VolumeBlobStore::GetFrom(const std::string& url, std::string_view fid, uint64_t offset, size_t len,
                                      char* dst) {
  http::Headers h;
  h.Set("Range", kelp::StrCat("bytes=", offset, "-", offset + len - 1));
  std::string target = kelp::StrCat("/", fid);
  size_t got = 0;
  std::string extra;  // bytes past len: only when the server ignored Range and sent it all
  auto sink = [&](std::string_view piece) -> absl::Status {
    size_t n = std::min(piece.size(), len - got);
    std::memcpy(dst + got, piece.data(), n);
    got += n;
    if (n < piece.size()) {
      extra.append(piece.substr(n));
      if (extra.size() > (256u << 20)) return absl::ResourceExhaustedError("blob too large");
    }
    return absl::OkStatus();
  };
  auto r = http_->Do("GET", url, target, h, {}, sink);
  if (!r.ok()) return PosixError(EIO, kelp::StrCat("GET ", url, target, ": ", r.status().message()));
  if (r->status == 206) {
    if (got != len || !extra.empty()) {
      return PosixError(EIO, kelp::StrCat("GET ", url, target, ": got ", got + extra.size(), " bytes, wanted ", len));
    }
    return absl::OkStatus();
  }
  if (r->status == 200) {  // the whole blob: dst holds its first got bytes, extra the rest
    std::string whole(dst, got);
    whole += extra;
    if (whole.size() < offset + len) return PosixError(EIO, kelp::StrCat("GET ", url, target, ": blob too short"));
    std::memcpy(dst, whole.data() + offset, len);
    return absl::OkStatus();
  }
  return StatusOfHttp(r->status, kelp::StrCat("GET ", url, target), "");
}

absl::Status VolumeBlobStore::Get(std::string_view fid, uint64_t offset, size_t len, char* dst) {
  if (len == 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(FileId id, FileId::Parse(fid));
  absl::Status last = PosixError(EIO, "no replica");
  for (int round = 0; round < 2; ++round) {
    auto urls = LocationsOf(id.volume_id, round > 0);
    if (!urls.ok()) {
      last = urls.status();
      continue;
    }
    for (const auto& url : *urls) {
      absl::Status s = GetFrom(url, fid, offset, len, dst);
      if (s.ok()) {
        get_bytes_->Inc(len);
        return s;
      }
      get_errors_->Inc();
      spdlog::warn("read of {} [{}, +{}) from {} failed: {}", fid, offset, len, url, s);
      last = s;
    }
  }
  return last;
}

}  // namespace kelp::mount
