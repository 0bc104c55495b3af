#include "volume/grpc/volume_grpc_service.h"

#include <cerrno>

#include "shared/file_id.h"
#include "shared/grpc_status.h"
#include "shared/status.h"
#include "shared/strings.h"
#include "shared/version.h"
#include "volume/core/heartbeat.h"
#include "volume/core/vacuum.h"

namespace kelp::volume {

VolumeGrpcService::VolumeGrpcService(Store* store, BlobService* blobs, double default_threshold,
                                     std::function<void()> on_change)
    : store_(store),
      blobs_(blobs),
      default_threshold_(default_threshold),
      on_change_(std::move(on_change)) {}

grpc::Status VolumeGrpcService::AllocateVolume(grpc::ServerContext*,
                                               const AllocateVolumeRequest* req,
                                               AllocateVolumeResponse*) {
  return GuardedCall("AllocateVolume", [&]() -> absl::Status {
    std::string replication = req->replication().empty() ? "000" : req->replication();
    auto v = store_->Allocate(req->volume_id(), req->collection(), replication);
    if (!v.ok()) return v.status();
    if ((*v)->replication() != replication) {
      return PosixError(EEXIST, kelp::StrCat("volume ", req->volume_id(),
                                             " exists with replication ", (*v)->replication()));
    }
    Changed();
    return absl::OkStatus();
  });
}

grpc::Status VolumeGrpcService::BatchDelete(grpc::ServerContext*, const BatchDeleteRequest* req,
                                            BatchDeleteResponse* resp) {
  return GuardedCall("BatchDelete", [&]() -> absl::Status {
    std::vector<std::string> fids(req->fids().begin(), req->fids().end());
    for (const auto& r : blobs_->BatchDelete(fids)) {
      DeleteResult* out = resp->add_results();
      out->set_fid(r.fid);
      out->set_status(r.status);
      out->set_error(r.error);
      out->set_size(r.size);
    }
    return absl::OkStatus();
  });
}

grpc::Status VolumeGrpcService::StatBlobs(grpc::ServerContext*, const StatBlobsRequest* req,
                                          StatBlobsResponse* resp) {
  return GuardedCall("StatBlobs", [&]() -> absl::Status {
    for (const std::string& f : req->fids()) {
      BlobStat* out = resp->add_blobs();
      out->set_fid(f);
      auto fid = FileId::Parse(f);
      if (!fid.ok()) {
        out->set_status(400);
        out->set_error(std::string(fid.status().message()));
        continue;
      }
      std::shared_ptr<Volume> v = store_->Get(fid->volume_id);
      absl::StatusOr<uint32_t> size =
          v ? v->Stat(fid->key, fid->cookie)
            : PosixError(ENOENT, kelp::StrCat("volume ", fid->volume_id, " is not on this server"));
      if (size.ok()) {
        out->set_status(200);
        out->set_size(*size);
      } else {
        out->set_status(HttpStatusOf(size.status()));
        out->set_error(std::string(size.status().message()));
      }
    }
    return absl::OkStatus();
  });
}

grpc::Status VolumeGrpcService::ListBlobs(grpc::ServerContext*, const ListBlobsRequest* req,
                                          ListBlobsResponse* resp) {
  return GuardedCall("ListBlobs", [&]() -> absl::Status {
    std::shared_ptr<Volume> v = store_->Get(req->volume_id());
    if (!v) {
      return PosixError(ENOENT, kelp::StrCat("volume ", req->volume_id(), " is not on this server"));
    }
    bool more = false;
    ASSIGN_OR_RETURN(auto listed,
                     v->List(req->after_key(), req->limit() == 0 ? 10000 : req->limit(), &more));
    resp->set_last_key(req->after_key());
    for (const Volume::Listed& l : listed) {
      BlobStat* out = resp->add_blobs();
      out->set_fid(FileId{req->volume_id(), l.key, l.cookie}.ToString());
      out->set_status(200);
      out->set_size(l.size);
      resp->set_last_key(l.key);
    }
    resp->set_more(more);
    return absl::OkStatus();
  });
}

grpc::Status VolumeGrpcService::Vacuum(grpc::ServerContext*, const VacuumRequest* req,
                                       VacuumResponse* resp) {
  return GuardedCall("Vacuum", [&]() -> absl::Status {
    double threshold = req->garbage_threshold() > 0 ? req->garbage_threshold() : default_threshold_;
    if (threshold > 1)
      return absl::InvalidArgumentError("garbage_threshold is a fraction in [0, 1]");
    auto r = VacuumVolumes(*store_, req->volume_id(), threshold);
    if (!r.ok()) return r.status();
    for (uint32_t id : r->compacted) resp->add_compacted(id);
    resp->set_reclaimed_bytes(r->reclaimed_bytes);
    if (!r->compacted.empty()) Changed();
    return absl::OkStatus();
  });
}

grpc::Status VolumeGrpcService::Status(grpc::ServerContext*, const StatusRequest*,
                                       StatusResponse* resp) {
  return GuardedCall("Status", [&]() -> absl::Status {
    resp->set_version(kVersion);
    for (const auto& v : store_->List()) FillVolumeInfo(*v, resp->add_volumes());
    if (auto du = store_->GetDiskUsage(); du.ok()) {
      resp->set_disk_free(du->free);
      resp->set_disk_total(du->total);
    }
    resp->set_max_volumes(store_->max_volumes());
    return absl::OkStatus();
  });
}

grpc::Status VolumeGrpcService::SetReadOnly(grpc::ServerContext*, const SetReadOnlyRequest* req,
                                            SetReadOnlyResponse*) {
  return GuardedCall("SetReadOnly", [&]() -> absl::Status {
    std::shared_ptr<Volume> v = store_->Get(req->volume_id());
    if (!v)
      return PosixError(ENOENT,
                        kelp::StrCat("volume ", req->volume_id(), " is not on this server"));
    v->SetReadOnly(req->read_only());
    Changed();
    return absl::OkStatus();
  });
}

grpc::Status VolumeGrpcService::DeleteVolume(grpc::ServerContext*, const DeleteVolumeRequest* req,
                                             DeleteVolumeResponse*) {
  return GuardedCall("DeleteVolume", [&]() -> absl::Status {
    RETURN_IF_ERROR(store_->Delete(req->volume_id()));
    Changed();
    return absl::OkStatus();
  });
}

}  // namespace kelp::volume
