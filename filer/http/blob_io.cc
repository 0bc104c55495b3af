#include "filer/http/blob_io.h"

#include <cerrno>

#include "shared/file_id.h"
#include "shared/log.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::filer {
namespace {

std::string UrlOf(const cluster::Location& l) { return l.url().empty() ? l.public_url() : l.url(); }

// Failures another volume or server may not have: retry those on a fresh assignment.
bool Retryable(const absl::Status& s) {
  switch (ErrnoOf(s)) {
    case EFBIG:  // the blob is over the volume server's size limit everywhere
    case EINVAL:
      return false;
    default:
      return true;
  }
}

}  // namespace

VolumeBlobIo::VolumeBlobIo(ClusterApi* cluster, volume::VolumeClient* client, Options options)
    : cluster_(cluster), client_(client), opts_(std::move(options)) {
  auto& reg = MetricsRegistry::Default();
  put_bytes_ = reg.GetCounter("kelp_filer_http_blob_put_bytes_total",
                              "Bytes the HTTP API uploaded to volume servers.");
  get_bytes_ = reg.GetCounter("kelp_filer_http_blob_get_bytes_total",
                              "Bytes the HTTP API read from volume servers.");
  put_retries_ = reg.GetCounter("kelp_filer_http_blob_put_retries_total",
                                "Blob uploads of the HTTP API retried on a fresh assignment.");
  get_failovers_ = reg.GetCounter("kelp_filer_http_blob_get_failovers_total",
                                  "Blob reads of the HTTP API that failed on one replica.");
}

absl::StatusOr<std::string> VolumeBlobIo::Put(std::string_view data) {
  absl::Status last;
  for (int attempt = 0; attempt < std::max(1, opts_.put_attempts); ++attempt) {
    if (attempt > 0) put_retries_->Inc();
    cluster::AssignRequest ar;
    ar.set_count(1);
    ar.set_replication(opts_.replication);
    ar.set_collection(opts_.collection);
    auto a = cluster_->Assign(ar);
    if (!a.ok()) {
      // Nothing to retry on: no writable volume (ENOSPC) or the topology is not ready.
      if (a.status().code() == absl::StatusCode::kResourceExhausted) {
        return PosixError(ENOSPC, StrCat("assign: ", a.status().message()));
      }
      return a.status();
    }
    if (a->locations_size() == 0) return PosixError(EIO, "assign returned no volume server");
    std::string url = UrlOf(a->locations(0));
    auto up = client_->Upload(url, a->fid(), data, false, a->auth());
    if (up.ok()) {
      put_bytes_->Inc(data.size());
      return a->fid();
    }
    last = up.status();
    spdlog::warn("http: upload of {} bytes as {} to {} failed (attempt {}): {}", data.size(),
                 a->fid(), url, attempt + 1, last);
    if (!Retryable(last)) break;
  }
  return last;
}

absl::Status VolumeBlobIo::Get(std::string_view fid, uint64_t offset, uint64_t length,
                               const ByteSink& sink) {
  if (length == 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(FileId id, FileId::Parse(fid));
  cluster::LookupVolumeRequest lr;
  lr.add_volume_ids(id.volume_id);
  ASSIGN_OR_RETURN(auto located, cluster_->LookupVolume(lr));
  std::vector<std::string> urls;
  for (const auto& v : located.volumes()) {
    if (v.volume_id() != id.volume_id) continue;
    for (const auto& l : v.locations()) urls.push_back(UrlOf(l));
  }
  if (urls.empty())
    return PosixError(EIO,
                      StrCat("volume ", id.volume_id, " of blob ", fid, " has no live server"));
  int failovers = 0;
  absl::Status s = ReadWithFailover(
      urls, offset, length,
      [&](const std::string& url, uint64_t off, uint64_t len, const ByteSink& piece_sink) {
        absl::Status r = client_->Read(url, fid, off, len, piece_sink);
        if (!r.ok())
          spdlog::warn("http: read of {} [{}, +{}) from {} failed: {}", fid, off, len, url, r);
        return r;
      },
      sink, &failovers);
  get_failovers_->Inc(failovers);
  if (s.ok()) get_bytes_->Inc(length);
  return s;
}

absl::Status ReadWithFailover(const std::vector<std::string>& urls, uint64_t offset,
                              uint64_t length, const RangeReader& read, const ByteSink& sink,
                              int* failovers) {
  uint64_t done = 0;  // bytes the sink took
  absl::Status sink_error;
  absl::Status last = PosixError(EIO, "blob has no replica to read from");
  for (const auto& url : urls) {
    absl::Status s = read(url, offset + done, length - done, [&](std::string_view piece) {
      piece = piece.substr(0, length - done);
      sink_error = sink(piece);
      if (sink_error.ok()) done += piece.size();
      return sink_error;
    });
    if (!sink_error.ok()) return sink_error;
    if (s.ok() && done == length) return s;
    if (s.ok())
      s = PosixError(EIO, StrCat("replica ", url, " sent ", length - done, " bytes too few"));
    ++*failovers;
    last = s;
  }
  return last;
}

void VolumeBlobIo::Discard(const std::vector<std::string>& fids) {
  if (fids.empty()) return;
  auto results = cluster_->DeleteBlobs(fids);
  for (size_t i = 0; i < results.size() && i < fids.size(); ++i) {
    if (!results[i].ok())
      spdlog::warn("http: could not delete uncommitted blob {}: {}", fids[i], results[i]);
  }
}

}  // namespace kelp::filer
