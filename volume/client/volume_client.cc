#include "volume/client/volume_client.h"

#include <cerrno>

#include <grpcpp/grpcpp.h>

#include "proto/volume.grpc.pb.h"
#include "shared/blocking.h"
#include "shared/grpc_status.h"
#include "shared/status.h"
#include "shared/strings.h"
#include "shared/file_id.h"
#include "shared/security/jwt.h"
#include "shared/security/security.h"

namespace kelp::volume {
namespace {

// The "error" of a {"error":"..."} body, or the body itself.
std::string ErrorText(std::string_view body) {
  size_t k = body.find("\"error\":\"");
  if (k == std::string_view::npos) return std::string(body.substr(0, 200));
  size_t start = k + 9, end = start;
  while (end < body.size() && body[end] != '"') end += body[end] == '\\' ? 2 : 1;
  return std::string(body.substr(start, std::min(end, body.size()) - start));
}

// Transport failures lose their errno (ECONNREFUSED means nothing to a FUSE caller): the
// blob may be elsewhere, so they are UNAVAILABLE.
absl::Status Transport(const absl::Status& s, std::string_view what) {
  return absl::UnavailableError(kelp::StrCat(what, ": ", ToStd(s.message())));
}

std::string Target(std::string_view fid) { return kelp::StrCat("/", fid); }

// Sets "Authorization: Bearer" for fid: the token given (from Assign), else one signed here
// when this process holds the key ([jwt.signing] for writes, [jwt.signing.read] for reads).
void SetAuth(http::Headers* h, std::string_view given, bool write, std::string_view fid) {
  std::string token(given);
  if (token.empty()) {
    auto sec = security::Current();
    const security::JwtKey& key = write ? sec->volume_write : sec->volume_read;
    if (!key.enabled()) return;
    auto id = FileId::Parse(fid);
    if (!id.ok()) return;  // the server answers 400
    token = security::SignFileIdToken(key, *id, 1);
  }
  h->Set("Authorization", "Bearer " + token);
}

}  // namespace

absl::Status StatusFromHttp(int status, std::string_view body, std::string_view what) {
  std::string msg = kelp::StrCat(what, ": HTTP ", status, ": ", ErrorText(body));
  switch (status) {
    case 404:
      return PosixError(ENOENT, msg);
    case 401:
      return PosixError(EACCES, msg);
    case 507:
      return PosixError(ENOSPC, msg);
    case 413:
      return PosixError(EFBIG, msg);
    case 403:
      return PosixError(EROFS, msg);
    case 409:
      return PosixError(EEXIST, msg);
    case 400:
      return PosixError(EINVAL, msg);
    case 416:
      return absl::OutOfRangeError(msg);
    case 503:
      return absl::UnavailableError(msg);
    default:
      return PosixError(EIO, msg);
  }
}

struct VolumeClient::Stubs {
  Mutex mu;
  std::map<std::string, std::unique_ptr<VolumeService::Stub>, std::less<>> stubs
      ABSL_GUARDED_BY(mu);

  VolumeService::Stub* Get(std::string_view address) {
    MutexLock l(mu);
    auto it = stubs.find(address);
    if (it == stubs.end()) {
      // A restarted server must be reachable again within a second or so, not after
      // gRPC's default reconnect back-off of up to two minutes.
      grpc::ChannelArguments args;
      args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
      args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 200);
      args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
      auto stub = VolumeService::NewStub(grpc::CreateCustomChannel(
          std::string(address), security::ChannelCredentials(), args));
      it = stubs.emplace(std::string(address), std::move(stub)).first;
    }
    return it->second.get();
  }
};

VolumeClient::VolumeClient() : VolumeClient(Options{}) {}

VolumeClient::VolumeClient(Options options)
    : http_(http::HttpClient::Options{options.connect_timeout_ms, options.io_timeout_ms,
                                      options.max_idle_per_host, size_t{4096} << 20}),
      stubs_(std::make_unique<Stubs>()) {}

VolumeClient::~VolumeClient() = default;

absl::StatusOr<VolumeClient::UploadResult> VolumeClient::Upload(std::string_view location,
                                                                std::string_view fid,
                                                                std::string_view data, bool fsync,
                                                                std::string_view auth) {
  std::string what = kelp::StrCat("upload ", fid, " to ", location);
  std::string target = Target(fid);
  if (fsync) target += "?fsync=true";
  http::Headers h;
  h.Set("Content-Type", "application/octet-stream");
  SetAuth(&h, auth, true, fid);
  auto resp = http_.Do("PUT", location, target, h, data);
  if (!resp.ok()) return Transport(resp.status(), what);
  if (resp->status != 201 && resp->status != 200)
    return StatusFromHttp(resp->status, resp->body, what);
  UploadResult r;
  r.size = data.size();
  std::string_view etag = resp->headers.Get("ETag");
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"')
    etag = etag.substr(1, etag.size() - 2);
  r.etag = std::string(etag);
  return r;
}

absl::Status VolumeClient::Read(std::string_view location, std::string_view fid, uint64_t offset,
                                uint64_t length, const ByteSink& sink) {
  std::string what = kelp::StrCat("read ", fid, " from ", location);
  http::Headers h;
  if (offset > 0 || length > 0) {
    h.Set("Range", length > 0 ? kelp::StrCat("bytes=", offset, "-", offset + length - 1)
                              : kelp::StrCat("bytes=", offset, "-"));
  }
  SetAuth(&h, {}, false, fid);
  const bool ranged = offset > 0 || length > 0;
  uint64_t left = length > 0 ? length : UINT64_MAX;
  absl::Status sink_error;
  auto resp = http_.Do(
      "GET", location, Target(fid), h, {},
      [&](std::string_view piece) -> absl::Status {
        if (piece.size() > left) piece = piece.substr(0, left);
        left -= piece.size();
        if (piece.empty()) return absl::OkStatus();
        sink_error = sink(piece);
        return sink_error;
      },
      http::BodyBuffer{sink.into, sink.into_size});
  if (!sink_error.ok()) return sink_error;
  if (!resp.ok()) return Transport(resp.status(), what);
  if (resp->status == 206 || (resp->status == 200 && !ranged)) return absl::OkStatus();
  if (resp->status == 200) {
    // Only reachable through a server without Range support: the sink saw the blob from
    // offset 0, which is wrong for offset > 0.
    if (offset > 0) return PosixError(EIO, kelp::StrCat(what, ": server ignored the Range header"));
    return absl::OkStatus();
  }
  return StatusFromHttp(resp->status, resp->body, what);
}

absl::StatusOr<std::string> VolumeClient::Read(std::string_view location, std::string_view fid,
                                               uint64_t offset, uint64_t length) {
  std::string out;
  RETURN_IF_ERROR(Read(location, fid, offset, length, [&](std::string_view piece) {
    out.append(piece);
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<NeedleLocation> VolumeClient::Locate(std::string_view location,
                                                    std::string_view fid) {
  std::string what = kelp::StrCat("locate ", fid, " on ", location);
  http::Headers h;
  h.Set(kLocalReadHeader, "1");
  SetAuth(&h, {}, false, fid);
  auto resp = http_.Do("GET", location, Target(fid), h);
  if (!resp.ok()) return Transport(resp.status(), what);
  if (resp->status != 200) return StatusFromHttp(resp->status, resp->body, what);
  auto loc = ParseNeedleLocation(resp->headers);
  // A server that does not know local reads answers the GET with the blob and none of the fields.
  if (!loc.ok()) return absl::UnimplementedError(kelp::StrCat(what, ": ", loc.status().message()));
  return loc;
}

absl::Status VolumeClient::Sync(std::string_view location, const std::vector<uint32_t>& volume_ids) {
  std::string target = "/sync?volumes=";
  for (size_t i = 0; i < volume_ids.size(); ++i) kelp::StrAppend(&target, i ? "," : "", volume_ids[i]);
  std::string what = kelp::StrCat("POST ", location, target);
  auto resp = http_.Do("POST", location, target, {}, {});
  if (!resp.ok()) return Transport(resp.status(), what);
  if (resp->status != 200) return StatusFromHttp(resp->status, resp->body, what);
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> VolumeClient::Delete(std::string_view location, std::string_view fid) {
  std::string what = kelp::StrCat("delete ", fid, " on ", location);
  http::Headers h;
  SetAuth(&h, {}, true, fid);
  auto resp = http_.Do("DELETE", location, Target(fid), h);
  if (!resp.ok()) return Transport(resp.status(), what);
  if (resp->status != 202 && resp->status != 200)
    return StatusFromHttp(resp->status, resp->body, what);
  uint64_t size = 0;
  size_t k = resp->body.find("\"size\":");
  if (k != std::string::npos) {
    size_t start = k + 7, end = start;
    while (end < resp->body.size() && isdigit(static_cast<unsigned char>(resp->body[end]))) ++end;
    (void)kelp::ParseInt(std::string_view(resp->body).substr(start, end - start), &size);
  }
  return size;
}

absl::StatusOr<std::vector<VolumeClient::DeleteResult>> VolumeClient::BatchDelete(
    std::string_view grpc_address, const std::vector<std::string>& fids) {
  BatchDeleteRequest req;
  for (const auto& f : fids) req.add_fids(f);
  BatchDeleteResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  grpc::Status s = stubs_->Get(grpc_address)->BatchDelete(&ctx, req, &resp);
  if (!s.ok()) {
    absl::Status st = FromGrpcStatus(s);
    if (st.code() == absl::StatusCode::kUnavailable ||
        st.code() == absl::StatusCode::kDeadlineExceeded) {
      return Transport(st, kelp::StrCat("batch delete on ", grpc_address));
    }
    return st;
  }
  std::vector<DeleteResult> out;
  for (const auto& r : resp.results())
    out.push_back(DeleteResult{r.fid(), r.status(), r.error(), r.size()});
  return out;
}

namespace {

// Runs one unary control-plane call with a deadline; transport failures become UNAVAILABLE.
template <typename Req, typename Resp, typename Method>
absl::Status Call(VolumeService::Stub* stub, Method method, const Req& req, Resp* resp,
                  std::string_view what, int deadline_s = 30) {
  AboutToBlock();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(deadline_s));
  grpc::Status s = (stub->*method)(&ctx, req, resp);
  if (s.ok()) return absl::OkStatus();
  absl::Status st = FromGrpcStatus(s);
  if (st.code() == absl::StatusCode::kUnavailable ||
      st.code() == absl::StatusCode::kDeadlineExceeded) {
    return Transport(st, what);
  }
  return st;
}

}  // namespace

absl::StatusOr<std::vector<BlobStat>> VolumeClient::StatBlobs(
    std::string_view grpc_address, const std::vector<std::string>& fids) {
  StatBlobsRequest req;
  for (const auto& f : fids) req.add_fids(f);
  StatBlobsResponse resp;
  RETURN_IF_ERROR(Call(stubs_->Get(grpc_address), &VolumeService::Stub::StatBlobs, req, &resp,
                       kelp::StrCat("stat blobs on ", grpc_address)));
  if (resp.blobs_size() != req.fids_size()) {
    return absl::InternalError(kelp::StrCat("stat blobs on ", grpc_address, ": ",
                                            resp.blobs_size(), " answers for ", req.fids_size()));
  }
  return std::vector<BlobStat>(resp.blobs().begin(), resp.blobs().end());
}

absl::StatusOr<std::vector<BlobStat>> VolumeClient::ListBlobs(std::string_view grpc_address,
                                                              uint32_t volume_id) {
  std::vector<BlobStat> out;
  ListBlobsRequest req;
  req.set_volume_id(volume_id);
  for (bool more = true; more;) {
    ListBlobsResponse resp;
    RETURN_IF_ERROR(Call(stubs_->Get(grpc_address), &VolumeService::Stub::ListBlobs, req, &resp,
                         kelp::StrCat("list blobs of volume ", volume_id, " on ", grpc_address)));
    out.insert(out.end(), resp.blobs().begin(), resp.blobs().end());
    more = resp.more() && resp.last_key() > req.after_key();
    req.set_after_key(resp.last_key());
  }
  return out;
}

absl::Status VolumeClient::AllocateVolume(std::string_view grpc_address, uint32_t volume_id,
                                          std::string_view collection,
                                          std::string_view replication) {
  AllocateVolumeRequest req;
  req.set_volume_id(volume_id);
  req.set_collection(std::string(collection));
  req.set_replication(std::string(replication));
  AllocateVolumeResponse resp;
  return Call(stubs_->Get(grpc_address), &VolumeService::Stub::AllocateVolume, req, &resp,
              kelp::StrCat("allocate volume ", volume_id, " on ", grpc_address));
}

absl::StatusOr<StatusResponse> VolumeClient::GetStatus(std::string_view grpc_address) {
  StatusResponse resp;
  RETURN_IF_ERROR(Call(stubs_->Get(grpc_address), &VolumeService::Stub::Status, StatusRequest(),
                       &resp, kelp::StrCat("status of ", grpc_address), 10));
  return resp;
}

absl::Status VolumeClient::SetReadOnly(std::string_view grpc_address, uint32_t volume_id,
                                       bool read_only) {
  SetReadOnlyRequest req;
  req.set_volume_id(volume_id);
  req.set_read_only(read_only);
  SetReadOnlyResponse resp;
  return Call(stubs_->Get(grpc_address), &VolumeService::Stub::SetReadOnly, req, &resp,
              kelp::StrCat("set volume ", volume_id, " read-only on ", grpc_address));
}

absl::StatusOr<VacuumResponse> VolumeClient::Vacuum(std::string_view grpc_address,
                                                    uint32_t volume_id, double threshold) {
  VacuumRequest req;
  req.set_volume_id(volume_id);
  req.set_garbage_threshold(threshold);
  VacuumResponse resp;
  // Compacting a 30 GB volume takes minutes.
  RETURN_IF_ERROR(Call(stubs_->Get(grpc_address), &VolumeService::Stub::Vacuum, req, &resp,
                       kelp::StrCat("vacuum on ", grpc_address), 3600));
  return resp;
}

absl::Status VolumeClient::DeleteVolume(std::string_view grpc_address, uint32_t volume_id) {
  DeleteVolumeRequest req;
  req.set_volume_id(volume_id);
  DeleteVolumeResponse resp;
  return Call(stubs_->Get(grpc_address), &VolumeService::Stub::DeleteVolume, req, &resp,
              kelp::StrCat("delete volume ", volume_id, " on ", grpc_address));
}

}  // namespace kelp::volume
