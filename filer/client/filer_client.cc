#include "filer/client/filer_client.h"

#include <sys/stat.h>

#include "shared/grpc_status.h"
#include "shared/security/security.h"

namespace kelp::filer {

FilerClient::FilerClient(std::shared_ptr<grpc::Channel> channel, FilerClientOptions options)
    : channel_(std::move(channel)), stub_(Filer::NewStub(channel_)), opts_(options) {}

std::unique_ptr<FilerClient> FilerClient::Connect(const std::string& grpc_address,
                                                  FilerClientOptions options) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_receive_bytes);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 30'000);
  auto channel =
      grpc::CreateCustomChannel(grpc_address, security::ChannelCredentials(), args);
  return std::make_unique<FilerClient>(std::move(channel), options);
}

void FilerClient::Prepare(grpc::ClientContext* ctx) const {
  ctx->set_deadline(std::chrono::system_clock::now() + opts_.rpc_timeout);
}

template <typename Resp, typename Req>
absl::StatusOr<Resp> FilerClient::Unary(
    grpc::Status (Filer::Stub::*method)(grpc::ClientContext*, const Req&, Resp*), const Req& req) {
  grpc::ClientContext ctx;
  Prepare(&ctx);
  Resp resp;
  grpc::Status s = (stub_.get()->*method)(&ctx, req, &resp);
  if (!s.ok()) return FromGrpcStatus(s);  // the one conversion at this edge
  return resp;
}

absl::StatusOr<Attr> FilerClient::Lookup(uint64_t parent, std::string_view name) {
  LookupRequest req;
  req.set_parent(parent);
  req.set_name(std::string(name));
  auto r = Unary<AttrResponse>(&Filer::Stub::Lookup, req);
  if (!r.ok()) return r.status();
  return std::move(*r->mutable_attr());
}

absl::StatusOr<Attr> FilerClient::GetAttr(uint64_t ino) {
  GetAttrRequest req;
  req.set_ino(ino);
  auto r = Unary<AttrResponse>(&Filer::Stub::GetAttr, req);
  if (!r.ok()) return r.status();
  return std::move(*r->mutable_attr());
}

absl::StatusOr<Attr> FilerClient::ResolvePath(std::string_view path) {
  ResolvePathRequest req;
  req.set_path(std::string(path));
  auto r = Unary<AttrResponse>(&Filer::Stub::ResolvePath, req);
  if (!r.ok()) return r.status();
  return std::move(*r->mutable_attr());
}

absl::Status FilerClient::ReadDir(uint64_t ino, uint64_t cookie, uint32_t limit, bool with_attrs,
                                  const std::function<bool(const DirEntry&)>& fn) {
  ReadDirRequest req;
  req.set_ino(ino);
  req.set_cookie(cookie);
  req.set_limit(limit);
  req.set_with_attrs(with_attrs);
  grpc::ClientContext ctx;
  if (opts_.readdir_timeout.count() > 0) {
    ctx.set_deadline(std::chrono::system_clock::now() + opts_.readdir_timeout);
  }
  auto reader = stub_->ReadDir(&ctx, req);
  ReadDirResponse batch;
  while (reader->Read(&batch)) {
    for (const auto& e : batch.entries()) {
      if (!fn(e)) {
        ctx.TryCancel();
        reader->Finish();  // drains; the status is a cancellation we asked for
        return absl::OkStatus();
      }
    }
  }
  return FromGrpcStatus(reader->Finish());
}

absl::StatusOr<Attr> FilerClient::Create(const CreateRequest& req) {
  auto r = Unary<AttrResponse>(&Filer::Stub::Create, req);
  if (!r.ok()) return r.status();
  return std::move(*r->mutable_attr());
}

absl::StatusOr<Attr> FilerClient::Mkdir(uint64_t parent, std::string_view name, uint32_t mode,
                                        uint32_t uid, uint32_t gid) {
  CreateRequest req;
  req.set_parent(parent);
  req.set_name(std::string(name));
  req.set_mode(S_IFDIR | (mode & 07777));
  req.set_uid(uid);
  req.set_gid(gid);
  req.set_exclusive(true);
  return Create(req);
}

absl::StatusOr<Attr> FilerClient::Symlink(uint64_t parent, std::string_view name,
                                          std::string_view target, uint32_t uid, uint32_t gid) {
  SymlinkRequest req;
  req.set_parent(parent);
  req.set_name(std::string(name));
  req.set_target(std::string(target));
  req.set_uid(uid);
  req.set_gid(gid);
  auto r = Unary<AttrResponse>(&Filer::Stub::Symlink, req);
  if (!r.ok()) return r.status();
  return std::move(*r->mutable_attr());
}

absl::StatusOr<Attr> FilerClient::Link(uint64_t ino, uint64_t new_parent,
                                       std::string_view new_name) {
  LinkRequest req;
  req.set_ino(ino);
  req.set_new_parent(new_parent);
  req.set_new_name(std::string(new_name));
  auto r = Unary<AttrResponse>(&Filer::Stub::Link, req);
  if (!r.ok()) return r.status();
  return std::move(*r->mutable_attr());
}

absl::StatusOr<Attr> FilerClient::Unlink(uint64_t parent, std::string_view name) {
  UnlinkRequest req;
  req.set_parent(parent);
  req.set_name(std::string(name));
  auto r = Unary<UnlinkResponse>(&Filer::Stub::Unlink, req);
  if (!r.ok()) return r.status();
  return std::move(*r->mutable_attr());
}

absl::Status FilerClient::Rmdir(uint64_t parent, std::string_view name) {
  UnlinkRequest req;
  req.set_parent(parent);
  req.set_name(std::string(name));
  auto r = Unary<RmdirResponse>(&Filer::Stub::Rmdir, req);
  return r.status();
}

absl::StatusOr<RenameResponse> FilerClient::Rename(uint64_t parent, std::string_view name,
                                                   uint64_t new_parent,
                                                   std::string_view new_name, uint32_t flags) {
  RenameRequest req;
  req.set_parent(parent);
  req.set_name(std::string(name));
  req.set_new_parent(new_parent);
  req.set_new_name(std::string(new_name));
  req.set_flags(flags);
  auto r = Unary<RenameResponse>(&Filer::Stub::Rename, req);
  return r;
}

absl::StatusOr<Attr> FilerClient::SetAttr(const SetAttrRequest& req) {
  auto r = Unary<AttrResponse>(&Filer::Stub::SetAttr, req);
  if (!r.ok()) return r.status();
  return std::move(*r->mutable_attr());
}

absl::StatusOr<std::string> FilerClient::GetXattr(uint64_t ino, std::string_view name) {
  XattrRequest req;
  req.set_ino(ino);
  req.set_name(std::string(name));
  auto r = Unary<XattrResponse>(&Filer::Stub::GetXattr, req);
  if (!r.ok()) return r.status();
  return std::move(*r->mutable_value());
}

absl::Status FilerClient::SetXattr(uint64_t ino, std::string_view name, std::string_view value,
                                   uint32_t flags) {
  XattrRequest req;
  req.set_ino(ino);
  req.set_name(std::string(name));
  req.set_value(std::string(value));
  req.set_flags(flags);
  auto r = Unary<Empty>(&Filer::Stub::SetXattr, req);
  return r.status();
}

absl::StatusOr<std::vector<std::string>> FilerClient::ListXattr(uint64_t ino) {
  XattrRequest req;
  req.set_ino(ino);
  auto r = Unary<XattrResponse>(&Filer::Stub::ListXattr, req);
  if (!r.ok()) return r.status();
  return std::vector<std::string>(r->names().begin(), r->names().end());
}

absl::Status FilerClient::RemoveXattr(uint64_t ino, std::string_view name) {
  XattrRequest req;
  req.set_ino(ino);
  req.set_name(std::string(name));
  auto r = Unary<Empty>(&Filer::Stub::RemoveXattr, req);
  return r.status();
}

absl::StatusOr<StatFsResponse> FilerClient::StatFs() {
  StatFsRequest req;
  auto r = Unary<StatFsResponse>(&Filer::Stub::StatFs, req);
  return r;
}

absl::StatusOr<GetChunksResponse> FilerClient::GetChunks(uint64_t ino) {
  GetChunksRequest req;
  req.set_ino(ino);
  auto r = Unary<GetChunksResponse>(&Filer::Stub::GetChunks, req);
  return r;
}

absl::StatusOr<CommitChunksResponse> FilerClient::CommitChunks(const CommitChunksRequest& req) {
  auto r = Unary<CommitChunksResponse>(&Filer::Stub::CommitChunks, req);
  return r;
}

absl::StatusOr<Attr> FilerClient::WriteInline(uint64_t ino, std::string_view data,
                                              int64_t mtime_ns, bool sync) {
  WriteInlineRequest req;
  req.set_ino(ino);
  req.set_data(std::string(data));
  req.set_mtime_ns(mtime_ns);
  req.set_sync(sync);
  auto r = Unary<AttrResponse>(&Filer::Stub::WriteInline, req);
  if (!r.ok()) return r.status();
  return std::move(*r->mutable_attr());
}

absl::Status FilerClient::Fsync(uint64_t ino) {
  FsyncRequest req;
  req.set_ino(ino);
  auto r = Unary<Empty>(&Filer::Stub::Fsync, req);
  return r.status();
}

absl::StatusOr<OpenSessionResponse> FilerClient::OpenSession(std::string_view client) {
  OpenSessionRequest req;
  req.set_client(std::string(client));
  auto r = Unary<OpenSessionResponse>(&Filer::Stub::OpenSession, req);
  return r;
}

absl::Status FilerClient::KeepAlive(std::string_view session,
                                    const std::vector<uint64_t>& open_inodes, bool reattach) {
  KeepAliveRequest req;
  req.set_session(std::string(session));
  for (uint64_t ino : open_inodes) req.add_open_inodes(ino);
  req.set_reattach(reattach);
  auto r = Unary<Empty>(&Filer::Stub::KeepAlive, req);
  return r.status();
}

absl::Status FilerClient::Open(std::string_view session, uint64_t ino) {
  OpenRequest req;
  req.set_session(std::string(session));
  req.set_ino(ino);
  auto r = Unary<Empty>(&Filer::Stub::Open, req);
  return r.status();
}

absl::Status FilerClient::Release(std::string_view session, uint64_t ino) {
  OpenRequest req;
  req.set_session(std::string(session));
  req.set_ino(ino);
  auto r = Unary<Empty>(&Filer::Stub::Release, req);
  return r.status();
}

absl::StatusOr<cluster::AssignResponse> FilerClient::Assign(const cluster::AssignRequest& req) {
  auto r = Unary<cluster::AssignResponse>(&Filer::Stub::Assign, req);
  return r;
}

absl::StatusOr<cluster::LookupVolumeResponse> FilerClient::LookupVolume(
    const cluster::LookupVolumeRequest& req) {
  auto r = Unary<cluster::LookupVolumeResponse>(&Filer::Stub::LookupVolume, req);
  return r;
}

FilerClient::EventStream::~EventStream() {
  if (reader_ && !finished_) {
    ctx_.TryCancel();
    reader_->Finish();
  }
}

bool FilerClient::EventStream::Next(Event* event) { return !finished_ && reader_->Read(event); }

absl::Status FilerClient::EventStream::Finish() {
  if (finished_) return absl::FailedPreconditionError("stream already finished");
  finished_ = true;
  return FromGrpcStatus(reader_->Finish());
}

std::unique_ptr<FilerClient::EventStream> FilerClient::Subscribe(uint64_t from_seq,
                                                                 std::string_view path_prefix,
                                                                 std::string_view client) {
  SubscribeRequest req;
  req.set_from_seq(from_seq);
  req.set_path_prefix(std::string(path_prefix));
  req.set_client(std::string(client));
  std::unique_ptr<EventStream> s(new EventStream());
  s->reader_ = stub_->Subscribe(&s->ctx_, req);
  return s;
}

}  // namespace kelp::filer
