#include "filer/grpc/filer_grpc_service.h"

#include "shared/grpc_status.h"
#include "shared/log.h"
#include "shared/metrics.h"
#include "shared/status.h"

namespace kelp::filer {
namespace {

// Bytes of entries per ReadDir message, well under gRPC's default 4 MiB message limit.
constexpr size_t kReadDirMessageBytes = 1 << 20;

}  // namespace

FilerGrpcService::FilerGrpcService(FilerService* core, FilerGrpcOptions options)
    : core_(core), opts_(options) {
  auto& reg = MetricsRegistry::Default();
  for (const char* m :
       {"Lookup", "GetAttr", "ReadDir", "Create", "Symlink", "Link", "Unlink", "Rmdir", "Rename",
        "SetAttr", "GetXattr", "SetXattr", "ListXattr", "RemoveXattr", "StatFs", "GetChunks",
        "CommitChunks", "WriteInline", "Fsync", "OpenSession", "KeepAlive", "Open", "Release",
        "Assign", "LookupVolume", "Subscribe", "ResolvePath"}) {
    Labels l = {{"method", m}};
    metrics_[m] = {reg.GetHistogram("kelp_filer_rpc_seconds", "Filer gRPC handler latency", l),
                   reg.GetCounter("kelp_filer_rpc_errors_total", "Filer gRPC calls that failed", l)};
  }
}

template <typename Fn>
grpc::Status FilerGrpcService::Run(const char* method, Fn&& fn) {
  auto start = std::chrono::steady_clock::now();
  grpc::Status s = GuardedCall(method, std::forward<Fn>(fn));
  auto m = metrics_.find(std::string_view(method));
  m->second.latency->Observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  if (!s.ok()) m->second.errors->Inc();
  return s;
}

void FilerGrpcService::AddParentAttr(uint64_t dir, Attr* out) {
  auto a = core_->GetAttr(dir);
  if (a.ok()) *out = std::move(*a);
}

grpc::Status FilerGrpcService::Lookup(grpc::ServerContext*, const LookupRequest* req,
                                      AttrResponse* resp) {
  return Run("Lookup", [&]() -> absl::Status {
    ASSIGN_OR_RETURN(*resp->mutable_attr(), core_->Lookup(req->parent(), req->name()));
    return absl::OkStatus();
  });
}

grpc::Status FilerGrpcService::GetAttr(grpc::ServerContext*, const GetAttrRequest* req,
                                       AttrResponse* resp) {
  return Run("GetAttr", [&]() -> absl::Status {
    ASSIGN_OR_RETURN(*resp->mutable_attr(), core_->GetAttr(req->ino()));
    return absl::OkStatus();
  });
}

grpc::Status FilerGrpcService::ReadDir(grpc::ServerContext* ctx, const ReadDirRequest* req,
                                       grpc::ServerWriter<ReadDirResponse>* writer) {
  return Run("ReadDir", [&]() -> absl::Status {
    // Entries go out in bounded messages as the core produces them: memory stays constant
    // however large the directory.
    ReadDirResponse batch;
    size_t bytes = 0;
    bool gone = false;
    auto flush = [&] {
      if (batch.entries_size() == 0) return true;
      bool ok = writer->Write(batch);
      batch.Clear();
      bytes = 0;
      return ok;
    };
    RETURN_IF_ERROR(core_->ReadDir(req->ino(), req->cookie(), req->limit(), req->with_attrs(),
                                   [&](DirEntry&& e) {
                                     bytes += e.ByteSizeLong();
                                     *batch.add_entries() = std::move(e);
                                     if (static_cast<size_t>(batch.entries_size()) >=
                                             opts_.readdir_batch ||
                                         bytes >= kReadDirMessageBytes) {
                                       if (!flush() || ctx->IsCancelled()) {
                                         gone = true;
                                         return false;
                                       }
                                     }
                                     return true;
                                   }));
    if (gone) return absl::CancelledError("client went away");
    if (!flush()) return absl::CancelledError("client went away");
    return absl::OkStatus();
  });
}

grpc::Status FilerGrpcService::Create(grpc::ServerContext*, const CreateRequest* req,
                                      AttrResponse* resp) {
  return Run("Create", [&]() -> absl::Status {
    CreateArgs a;
    a.parent = req->parent();
    a.name = req->name();
    a.mode = req->mode();
    a.uid = req->uid();
    a.gid = req->gid();
    a.rdev = req->rdev();
    a.exclusive = req->exclusive();
    a.session = req->session();
    a.open_handle = req->open_handle();
    ASSIGN_OR_RETURN(*resp->mutable_attr(), core_->Create(a));
    AddParentAttr(a.parent, resp->mutable_parent_attr());
    return absl::OkStatus();
  });
}

grpc::Status FilerGrpcService::Symlink(grpc::ServerContext*, const SymlinkRequest* req,
                                       AttrResponse* resp) {
  return Run("Symlink", [&]() -> absl::Status {
    ASSIGN_OR_RETURN(*resp->mutable_attr(), core_->Symlink(req->parent(), req->name(),
                                                           req->target(), req->uid(), req->gid()));
    AddParentAttr(req->parent(), resp->mutable_parent_attr());
    return absl::OkStatus();
  });
}

grpc::Status FilerGrpcService::Link(grpc::ServerContext*, const LinkRequest* req,
                                    AttrResponse* resp) {
  return Run("Link", [&]() -> absl::Status {
    ASSIGN_OR_RETURN(*resp->mutable_attr(),
                     core_->Link(req->ino(), req->new_parent(), req->new_name()));
    AddParentAttr(req->new_parent(), resp->mutable_parent_attr());
    return absl::OkStatus();
  });
}

grpc::Status FilerGrpcService::Unlink(grpc::ServerContext*, const UnlinkRequest* req,
                                      UnlinkResponse* resp) {
  return Run("Unlink", [&]() -> absl::Status {
    ASSIGN_OR_RETURN(*resp->mutable_attr(), core_->Unlink(req->parent(), req->name()));
    AddParentAttr(req->parent(), resp->mutable_parent_attr());
    return absl::OkStatus();
  });
}

grpc::Status FilerGrpcService::Rmdir(grpc::ServerContext*, const UnlinkRequest* req, RmdirResponse* resp) {
  return Run("Rmdir", [&]() -> absl::Status {
    RETURN_IF_ERROR(core_->Rmdir(req->parent(), req->name()));
    AddParentAttr(req->parent(), resp->mutable_parent_attr());
    return absl::OkStatus();
  });
}

grpc::Status FilerGrpcService::Rename(grpc::ServerContext*, const RenameRequest* req,
                                      RenameResponse* resp) {
  return Run("Rename", [&]() -> absl::Status {
    ASSIGN_OR_RETURN(RenameResult r, core_->Rename(req->parent(), req->name(), req->new_parent(),
                                                   req->new_name(), req->flags()));
    *resp->mutable_moved() = std::move(r.moved);
    if (r.replaced) *resp->mutable_replaced() = std::move(*r.replaced);
    AddParentAttr(req->parent(), resp->mutable_parent_attr());
    AddParentAttr(req->new_parent(), resp->mutable_new_parent_attr());
    return absl::OkStatus();
  });
}

grpc::Status FilerGrpcService::SetAttr(grpc::ServerContext*, const SetAttrRequest* req,
                                       AttrResponse* resp) {
  return Run("SetAttr", [&]() -> absl::Status {
    ASSIGN_OR_RETURN(*resp->mutable_attr(), core_->SetAttr(*req));
    return absl::OkStatus();
  });
}

grpc::Status FilerGrpcService::GetXattr(grpc::ServerContext*, const XattrRequest* req,
                                        XattrResponse* resp) {
  return Run("GetXattr", [&]() -> absl::Status {
    ASSIGN_OR_RETURN(*resp->mutable_value(), core_->GetXattr(req->ino(), req->name()));
    return absl::OkStatus();
  });
}

grpc::Status FilerGrpcService::SetXattr(grpc::ServerContext*, const XattrRequest* req, Empty*) {
  return Run("SetXattr", [&] {
    return core_->SetXattr(req->ino(), req->name(), req->value(), req->flags());
  });
}

grpc::Status FilerGrpcService::ListXattr(grpc::ServerContext*, const XattrRequest* req,
                                         XattrResponse* resp) {
  return Run("ListXattr", [&]() -> absl::Status {
    ASSIGN_OR_RETURN(auto names, core_->ListXattr(req->ino()));
    for (auto& n : names) resp->add_names(std::move(n));
    return absl::OkStatus();
  });
}

grpc::Status FilerGrpcService::RemoveXattr(grpc::ServerContext*, const XattrRequest* req,
                                           Empty*) {
  return Run("RemoveXattr", [&] { return core_->RemoveXattr(req->ino(), req->name()); });
}

grpc::Status FilerGrpcService::StatFs(grpc::ServerContext*, const StatFsRequest*,
                                      StatFsResponse* resp) {
  return Run("StatFs", [&]() -> absl::Status {
    ASSIGN_OR_RETURN(*resp, core_->StatFs());
    return absl::OkStatus();
  });
}

grpc::Status FilerGrpcService::GetChunks(grpc::ServerContext*, const GetChunksRequest* req,
                                         GetChunksResponse* resp) {
  return Run("GetChunks", [&]() -> absl::Status {
    ASSIGN_OR_RETURN(*resp, core_->GetChunks(req->ino()));
    return absl::OkStatus();
  });
}

grpc::Status FilerGrpcService::CommitChunks(grpc::ServerContext*, const CommitChunksRequest* req,
                                            CommitChunksResponse* resp) {
  return Run("CommitChunks", [&]() -> absl::Status {
    ASSIGN_OR_RETURN(*resp, core_->CommitChunks(*req));
    return absl::OkStatus();
  });
}

grpc::Status FilerGrpcService::WriteInline(grpc::ServerContext*, const WriteInlineRequest* req,
                                           AttrResponse* resp) {
  return Run("WriteInline", [&]() -> absl::Status {
    ASSIGN_OR_RETURN(*resp->mutable_attr(), core_->WriteInline(req->ino(), req->data(),
                                                               req->mtime_ns(), req->sync()));
    return absl::OkStatus();
  });
}

grpc::Status FilerGrpcService::Fsync(grpc::ServerContext*, const FsyncRequest* req, Empty*) {
  return Run("Fsync", [&] { return core_->Fsync(req->ino()); });
}

grpc::Status FilerGrpcService::OpenSession(grpc::ServerContext*, const OpenSessionRequest* req,
                                           OpenSessionResponse* resp) {
  return Run("OpenSession", [&]() -> absl::Status {
    ASSIGN_OR_RETURN(*resp, core_->OpenSession(req->client()));
    return absl::OkStatus();
  });
}

grpc::Status FilerGrpcService::KeepAlive(grpc::ServerContext*, const KeepAliveRequest* req,
                                         Empty*) {
  return Run("KeepAlive", [&] {
    std::vector<uint64_t> open(req->open_inodes().begin(), req->open_inodes().end());
    return core_->KeepAlive(req->session(), open, req->reattach());
  });
}

grpc::Status FilerGrpcService::Open(grpc::ServerContext*, const OpenRequest* req, Empty*) {
  return Run("Open", [&] { return core_->Open(req->session(), req->ino()); });
}

grpc::Status FilerGrpcService::Release(grpc::ServerContext*, const OpenRequest* req, Empty*) {
  return Run("Release", [&] { return core_->Release(req->session(), req->ino()); });
}

grpc::Status FilerGrpcService::Assign(grpc::ServerContext*, const cluster::AssignRequest* req,
                                      cluster::AssignResponse* resp) {
  return Run("Assign", [&]() -> absl::Status {
    ASSIGN_OR_RETURN(*resp, core_->cluster()->Assign(*req));
    return absl::OkStatus();
  });
}

grpc::Status FilerGrpcService::LookupVolume(grpc::ServerContext*,
                                            const cluster::LookupVolumeRequest* req,
                                            cluster::LookupVolumeResponse* resp) {
  return Run("LookupVolume", [&]() -> absl::Status {
    ASSIGN_OR_RETURN(*resp, core_->cluster()->LookupVolume(*req));
    return absl::OkStatus();
  });
}

grpc::Status FilerGrpcService::Subscribe(grpc::ServerContext* ctx, const SubscribeRequest* req,
                                         grpc::ServerWriter<Event>* writer) {
  return Run("Subscribe", [&]() -> absl::Status {
    ASSIGN_OR_RETURN(auto sub, core_->Subscribe(req->from_seq(), req->path_prefix()));
    spdlog::debug("filer: subscriber {} from seq {}", req->client(), sub->cursor());
    while (!shutdown_ && !ctx->IsCancelled()) {
      ASSIGN_OR_RETURN(auto events, sub->Next(opts_.subscribe_batch, opts_.subscribe_poll));
      for (size_t i = 0; i < events.size(); ++i) {
        // Buffer all but the last of a batch; the last one flushes.
        grpc::WriteOptions wo;
        if (i + 1 < events.size()) wo.set_buffer_hint();
        if (!writer->Write(events[i], wo)) return absl::CancelledError("subscriber went away");
      }
    }
    if (shutdown_) return absl::UnavailableError("filer is shutting down");
    return absl::CancelledError("subscriber went away");
  });
}

grpc::Status FilerGrpcService::ResolvePath(grpc::ServerContext*, const ResolvePathRequest* req,
                                           AttrResponse* resp) {
  return Run("ResolvePath", [&]() -> absl::Status {
    ASSIGN_OR_RETURN(*resp->mutable_attr(), core_->ResolvePath(req->path()));
    return absl::OkStatus();
  });
}

}  // namespace kelp::filer
