#include "mount/client/grpc_meta_client.h"

#include <chrono>

#include "shared/grpc_status.h"
#include "shared/status.h"
#include "shared/strings.h"
#include "shared/security/security.h"

namespace kelp::mount {
namespace {

// Wraps one unary call: context with deadline, status conversion.
template <typename Resp, typename Call>
absl::StatusOr<Resp> Unary(const GrpcMetaClient* self, int timeout_ms, Call&& call) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
  Resp resp;
  grpc::Status s = call(&ctx, &resp);
  if (!s.ok()) return FromGrpcStatus(s);
  return resp;
}

class GrpcEventStream : public EventStream {
 public:
  GrpcEventStream(std::unique_ptr<grpc::ClientContext> ctx,
                  std::unique_ptr<grpc::ClientReader<filer::Event>> reader)
      : ctx_(std::move(ctx)), reader_(std::move(reader)) {}
  ~GrpcEventStream() override {
    ctx_->TryCancel();
    if (!finished_) reader_->Finish().ok();
  }
  absl::StatusOr<filer::Event> Next() override {
    filer::Event ev;
    if (reader_->Read(&ev)) return ev;
    finished_ = true;
    grpc::Status s = reader_->Finish();
    if (s.ok()) return absl::UnavailableError("event stream ended");
    return FromGrpcStatus(s);
  }
  void Cancel() override { ctx_->TryCancel(); }

 private:
  std::unique_ptr<grpc::ClientContext> ctx_;
  std::unique_ptr<grpc::ClientReader<filer::Event>> reader_;
  bool finished_ = false;
};

void TakeDirAfter(Attr* sent, Attr* dir_after) {
  if (dir_after != nullptr && sent->ino() != 0) *dir_after = std::move(*sent);
}

}  // namespace

GrpcMetaClient::GrpcMetaClient(const std::string& grpc_address, int rpc_timeout_ms)
    : rpc_timeout_ms_(rpc_timeout_ms) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  channel_ = grpc::CreateCustomChannel(grpc_address, security::ChannelCredentials(), args);
  stub_ = filer::Filer::NewStub(channel_);
}

void GrpcMetaClient::Prepare(grpc::ClientContext* ctx) const {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(rpc_timeout_ms_));
}

absl::Status GrpcMetaClient::WaitConnected(int timeout_ms) {
  auto deadline = std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms);
  if (!channel_->WaitForConnected(deadline)) {
    return absl::UnavailableError(kelp::StrCat("cannot reach the filer's gRPC port within ", timeout_ms, " ms"));
  }
  return absl::OkStatus();
}

#define KELP_UNARY(Resp, Method, req) \
  Unary<Resp>(this, rpc_timeout_ms_, [&](grpc::ClientContext* c, Resp* r) { return stub_->Method(c, req, r); })

absl::StatusOr<Attr> GrpcMetaClient::Lookup(uint64_t parent, std::string_view name) {
  filer::LookupRequest req;
  req.set_parent(parent);
  req.set_name(std::string(name));
  ASSIGN_OR_RETURN(auto r, KELP_UNARY(filer::AttrResponse, Lookup, req));
  return r.attr();
}

absl::StatusOr<Attr> GrpcMetaClient::GetAttr(uint64_t ino) {
  filer::GetAttrRequest req;
  req.set_ino(ino);
  ASSIGN_OR_RETURN(auto r, KELP_UNARY(filer::AttrResponse, GetAttr, req));
  return r.attr();
}

absl::Status GrpcMetaClient::ReadDir(uint64_t ino, uint64_t cookie, uint32_t limit, bool with_attrs,
                                     const std::function<bool(filer::DirEntry&&)>& fn) {
  filer::ReadDirRequest req;
  req.set_ino(ino);
  req.set_cookie(cookie);
  req.set_limit(limit);
  req.set_with_attrs(with_attrs);
  grpc::ClientContext ctx;
  Prepare(&ctx);
  auto reader = stub_->ReadDir(&ctx, req);
  filer::ReadDirResponse resp;
  bool stopped = false;
  while (!stopped && reader->Read(&resp)) {
    for (auto& e : *resp.mutable_entries()) {
      if (!fn(std::move(e))) {
        stopped = true;
        break;
      }
    }
  }
  if (stopped) {
    ctx.TryCancel();
    reader->Finish().ok();
    return absl::OkStatus();
  }
  return FromGrpcStatus(reader->Finish());
}

absl::StatusOr<Attr> GrpcMetaClient::Create(const filer::CreateRequest& req, Attr* dir_after) {
  ASSIGN_OR_RETURN(auto r, KELP_UNARY(filer::AttrResponse, Create, req));
  TakeDirAfter(r.mutable_parent_attr(), dir_after);
  return r.attr();
}

absl::StatusOr<Attr> GrpcMetaClient::Symlink(const filer::SymlinkRequest& req, Attr* dir_after) {
  ASSIGN_OR_RETURN(auto r, KELP_UNARY(filer::AttrResponse, Symlink, req));
  TakeDirAfter(r.mutable_parent_attr(), dir_after);
  return r.attr();
}

absl::StatusOr<Attr> GrpcMetaClient::Link(uint64_t ino, uint64_t new_parent, std::string_view new_name, Attr* dir_after) {
  filer::LinkRequest req;
  req.set_ino(ino);
  req.set_new_parent(new_parent);
  req.set_new_name(std::string(new_name));
  ASSIGN_OR_RETURN(auto r, KELP_UNARY(filer::AttrResponse, Link, req));
  TakeDirAfter(r.mutable_parent_attr(), dir_after);
  return r.attr();
}

absl::StatusOr<Attr> GrpcMetaClient::Unlink(uint64_t parent, std::string_view name, Attr* dir_after) {
  filer::UnlinkRequest req;
  req.set_parent(parent);
  req.set_name(std::string(name));
  ASSIGN_OR_RETURN(auto r, KELP_UNARY(filer::UnlinkResponse, Unlink, req));
  TakeDirAfter(r.mutable_parent_attr(), dir_after);
  return r.attr();
}

absl::Status GrpcMetaClient::Rmdir(uint64_t parent, std::string_view name, Attr* dir_after) {
  filer::UnlinkRequest req;
  req.set_parent(parent);
  req.set_name(std::string(name));
  ASSIGN_OR_RETURN(auto r, KELP_UNARY(filer::RmdirResponse, Rmdir, req));
  TakeDirAfter(r.mutable_parent_attr(), dir_after);
  return absl::OkStatus();
}

absl::StatusOr<filer::RenameResponse> GrpcMetaClient::Rename(const filer::RenameRequest& req) {
  return KELP_UNARY(filer::RenameResponse, Rename, req);
}

absl::StatusOr<Attr> GrpcMetaClient::SetAttr(const filer::SetAttrRequest& req) {
  ASSIGN_OR_RETURN(auto r, KELP_UNARY(filer::AttrResponse, SetAttr, req));
  return r.attr();
}

absl::StatusOr<std::string> GrpcMetaClient::GetXattr(uint64_t ino, std::string_view name) {
  filer::XattrRequest req;
  req.set_ino(ino);
  req.set_name(std::string(name));
  ASSIGN_OR_RETURN(auto r, KELP_UNARY(filer::XattrResponse, GetXattr, req));
  return std::move(*r.mutable_value());
}

absl::Status GrpcMetaClient::SetXattr(uint64_t ino, std::string_view name, std::string_view value, uint32_t flags) {
  filer::XattrRequest req;
  req.set_ino(ino);
  req.set_name(std::string(name));
  req.set_value(std::string(value));
  req.set_flags(flags);
  return KELP_UNARY(filer::Empty, SetXattr, req).status();
}

absl::StatusOr<std::vector<std::string>> GrpcMetaClient::ListXattr(uint64_t ino) {
  filer::XattrRequest req;
  req.set_ino(ino);
  ASSIGN_OR_RETURN(auto r, KELP_UNARY(filer::XattrResponse, ListXattr, req));
  return std::vector<std::string>(r.names().begin(), r.names().end());
}

absl::Status GrpcMetaClient::RemoveXattr(uint64_t ino, std::string_view name) {
  filer::XattrRequest req;
  req.set_ino(ino);
  req.set_name(std::string(name));
  return KELP_UNARY(filer::Empty, RemoveXattr, req).status();
}

absl::StatusOr<filer::StatFsResponse> GrpcMetaClient::StatFs() {
  filer::StatFsRequest req;
  return KELP_UNARY(filer::StatFsResponse, StatFs, req);
}

absl::StatusOr<filer::GetChunksResponse> GrpcMetaClient::GetChunks(uint64_t ino) {
  filer::GetChunksRequest req;
  req.set_ino(ino);
  return KELP_UNARY(filer::GetChunksResponse, GetChunks, req);
}

absl::StatusOr<filer::CommitChunksResponse> GrpcMetaClient::CommitChunks(const filer::CommitChunksRequest& req) {
  return KELP_UNARY(filer::CommitChunksResponse, CommitChunks, req);
}

absl::StatusOr<Attr> GrpcMetaClient::WriteInline(uint64_t ino, std::string_view data, int64_t mtime_ns, bool sync) {
  filer::WriteInlineRequest req;
  req.set_ino(ino);
  req.set_data(std::string(data));
  req.set_mtime_ns(mtime_ns);
  req.set_sync(sync);
  ASSIGN_OR_RETURN(auto r, KELP_UNARY(filer::AttrResponse, WriteInline, req));
  return r.attr();
}

absl::Status GrpcMetaClient::Fsync(uint64_t ino) {
  filer::FsyncRequest req;
  req.set_ino(ino);
  return KELP_UNARY(filer::Empty, Fsync, req).status();
}

absl::StatusOr<filer::OpenSessionResponse> GrpcMetaClient::OpenSession(std::string_view client) {
  filer::OpenSessionRequest req;
  req.set_client(std::string(client));
  return KELP_UNARY(filer::OpenSessionResponse, OpenSession, req);
}

absl::Status GrpcMetaClient::KeepAlive(std::string_view session, const std::vector<uint64_t>& open_inodes,
                                       bool reattach) {
  filer::KeepAliveRequest req;
  req.set_session(std::string(session));
  for (uint64_t i : open_inodes) req.add_open_inodes(i);
  if (reattach) {
    // The filer's proto has the flag since it settled its session API; older protos sent the
    // inodes alone.
    if (const auto* f = req.GetDescriptor()->FindFieldByName("reattach")) req.GetReflection()->SetBool(&req, f, true);
  }
  return KELP_UNARY(filer::Empty, KeepAlive, req).status();
}

absl::Status GrpcMetaClient::Open(std::string_view session, uint64_t ino) {
  filer::OpenRequest req;
  req.set_session(std::string(session));
  req.set_ino(ino);
  return KELP_UNARY(filer::Empty, Open, req).status();
}

absl::Status GrpcMetaClient::Release(std::string_view session, uint64_t ino) {
  filer::OpenRequest req;
  req.set_session(std::string(session));
  req.set_ino(ino);
  return KELP_UNARY(filer::Empty, Release, req).status();
}

namespace {
// The request type of Filer.Assign, whatever the proto names it (filer.AssignRequest before
// the filer's API settled on cluster.AssignRequest); both have the same fields.
template <typename Req, typename Resp>
Req RequestOf(grpc::Status (filer::Filer::Stub::*)(grpc::ClientContext*, const Req&, Resp*));
using AssignReq = decltype(RequestOf(&filer::Filer::Stub::Assign));
}  // namespace

absl::StatusOr<cluster::AssignResponse> GrpcMetaClient::Assign(uint32_t count, std::string_view replication,
                                                               std::string_view collection) {
  AssignReq req;
  req.set_count(count);
  req.set_replication(std::string(replication));
  req.set_collection(std::string(collection));
  return KELP_UNARY(cluster::AssignResponse, Assign, req);
}

absl::StatusOr<cluster::LookupVolumeResponse> GrpcMetaClient::LookupVolume(const std::vector<uint32_t>& volume_ids) {
  cluster::LookupVolumeRequest req;
  for (uint32_t v : volume_ids) req.add_volume_ids(v);
  return KELP_UNARY(cluster::LookupVolumeResponse, LookupVolume, req);
}

absl::StatusOr<std::unique_ptr<EventStream>> GrpcMetaClient::Subscribe(uint64_t from_seq,
                                                                       std::string_view path_prefix) {
  filer::SubscribeRequest req;
  req.set_from_seq(from_seq);
  req.set_path_prefix(std::string(path_prefix));
  req.set_client("kelp mount");
  auto ctx = std::make_unique<grpc::ClientContext>();
  auto reader = stub_->Subscribe(ctx.get(), req);
  return std::unique_ptr<EventStream>(new GrpcEventStream(std::move(ctx), std::move(reader)));
}

#undef KELP_UNARY

}  // namespace kelp::mount
