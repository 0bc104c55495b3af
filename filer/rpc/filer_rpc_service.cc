#include "filer/rpc/filer_rpc_service.h"

#include <iterator>
#include <thread>
#include <vector>

#include "filer/client/filer_methods.h"
#include "shared/log.h"
#include "shared/rpc/caller.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::filer {
namespace {

using rpc::Exec;

// Bytes of entries per ReadDir page.
constexpr size_t kReadDirPageBytes = 1 << 20;

constexpr uint16_t M(FilerMethod m) { return MethodNumber(m); }

// Freed blobs into an answer: the client's read cache drops them.
void MoveFreed(std::vector<FreedBlob>& from, google::protobuf::RepeatedPtrField<FreedBlob>* to) {
  to->Add(std::make_move_iterator(from.begin()), std::make_move_iterator(from.end()));
}

}  // namespace

FilerRpcService::FilerRpcService(FilerService* core, FilerRpcOptions options) : core_(core), opts_(options) {
  AddNamespaceMethods();
  AddDataMethods();
  AddSessionMethods();
}

void FilerRpcService::AddParentAttr(uint64_t dir, Attr* out) {
  auto a = core_->GetAttr(dir);
  if (a.ok()) *out = std::move(*a);
}

absl::Status FilerRpcService::UnlinkOne(const UnlinkRequest& req, UnlinkResponse* resp) {
  std::vector<FreedBlob> freed;
  ASSIGN_OR_RETURN(*resp->mutable_attr(), core_->Unlink(req.parent(), req.name(), &freed));
  MoveFreed(freed, resp->mutable_freed());
  AddParentAttr(req.parent(), resp->mutable_parent_attr());
  return absl::OkStatus();
}

void FilerRpcService::AddNamespaceMethods() {
  service_.AddUnary<LookupRequest, AttrResponse>(
      M(FilerMethod::kLookup), "Lookup", [this](const LookupRequest& req, AttrResponse* resp) -> absl::Status {
        ASSIGN_OR_RETURN(*resp->mutable_attr(), core_->Lookup(req.parent(), req.name()));
        return absl::OkStatus();
      });
  service_.AddUnary<GetAttrRequest, AttrResponse>(
      M(FilerMethod::kGetAttr), "GetAttr", [this](const GetAttrRequest& req, AttrResponse* resp) -> absl::Status {
        ASSIGN_OR_RETURN(*resp->mutable_attr(), core_->GetAttr(req.ino()));
        return absl::OkStatus();
      });
  service_.AddUnary<ResolvePathRequest, AttrResponse>(
      M(FilerMethod::kResolvePath), "ResolvePath",
      [this](const ResolvePathRequest& req, AttrResponse* resp) -> absl::Status {
        ASSIGN_OR_RETURN(*resp->mutable_attr(), core_->ResolvePath(req.path()));
        return absl::OkStatus();
      });
  service_.AddUnary<ReadDirRequest, ReadDirResponse>(
      M(FilerMethod::kReadDir), "ReadDir",
      [this](const ReadDirRequest& req, ReadDirResponse* resp) -> absl::Status {
        size_t limit = req.limit() == 0 ? opts_.readdir_max_page
                                        : std::min<size_t>(req.limit(), opts_.readdir_max_page);
        size_t bytes = 0;
        bool full = false;
        // The page shows one version of the directory if that did not move while it was read.
        auto before = core_->GetAttr(req.ino());
        // One more than the page holds tells whether the listing goes on.
        RETURN_IF_ERROR(core_->ReadDir(req.ino(), req.cookie(), limit + 1, req.with_attrs(), [&](DirEntry&& e) {
          if (static_cast<size_t>(resp->entries_size()) >= limit || bytes >= kReadDirPageBytes) {
            full = true;
            return false;
          }
          bytes += e.ByteSizeLong();
          *resp->add_entries() = std::move(e);
          return true;
        }));
        resp->set_eof(!full);
        auto after = core_->GetAttr(req.ino());
        if (before.ok() && after.ok() && before->version() == after->version()) {
          resp->set_dir_version(before->version());
        }
        return absl::OkStatus();
      },
      [](const ReadDirRequest& req) {
        return req.limit() != 0 && req.limit() <= kInlineReadDirLimit ? Exec::kInline : Exec::kWorker;
      });
  service_.AddUnary<CreateRequest, AttrResponse>(
      M(FilerMethod::kCreate), "Create", [this](const CreateRequest& req, AttrResponse* resp) -> absl::Status {
        CreateArgs a;
        a.parent = req.parent();
        a.name = req.name();
        a.mode = req.mode();
        a.uid = req.uid();
        a.gid = req.gid();
        a.rdev = req.rdev();
        a.exclusive = req.exclusive();
        a.session = req.session();
        a.open_handle = req.open_handle();
        a.truncate = req.truncate();
        ASSIGN_OR_RETURN(*resp->mutable_attr(), core_->Create(a));
        AddParentAttr(a.parent, resp->mutable_parent_attr());
        return absl::OkStatus();
      });
  service_.AddUnary<SymlinkRequest, AttrResponse>(
      M(FilerMethod::kSymlink), "Symlink", [this](const SymlinkRequest& req, AttrResponse* resp) -> absl::Status {
        ASSIGN_OR_RETURN(*resp->mutable_attr(),
                         core_->Symlink(req.parent(), req.name(), req.target(), req.uid(), req.gid()));
        AddParentAttr(req.parent(), resp->mutable_parent_attr());
        return absl::OkStatus();
      });
  service_.AddUnary<LinkRequest, AttrResponse>(
      M(FilerMethod::kLink), "Link", [this](const LinkRequest& req, AttrResponse* resp) -> absl::Status {
        ASSIGN_OR_RETURN(*resp->mutable_attr(), core_->Link(req.ino(), req.new_parent(), req.new_name()));
        AddParentAttr(req.new_parent(), resp->mutable_parent_attr());
        return absl::OkStatus();
      });
  service_.AddUnary<UnlinkRequest, UnlinkResponse>(
      M(FilerMethod::kUnlink), "Unlink",
      [this](const UnlinkRequest& req, UnlinkResponse* resp) { return UnlinkOne(req, resp); });
  service_.AddUnary<UnlinkBatchRequest, UnlinkBatchResponse>(
      M(FilerMethod::kUnlinkBatch), "UnlinkBatch",
      [this](const UnlinkBatchRequest& req, UnlinkBatchResponse* resp) -> absl::Status {
        if (req.unlinks_size() > kMaxUnlinkBatch) {
          return absl::InvalidArgumentError(kelp::StrCat("an unlink batch holds at most ", kMaxUnlinkBatch, " unlinks"));
        }
        // Each run of one directory's names is one write (FilerService::UnlinkMany).
        for (int begin = 0; begin < req.unlinks_size();) {
          const uint64_t parent = req.unlinks(begin).parent();
          int end = begin;
          std::vector<std::string> names;
          for (; end < req.unlinks_size() && req.unlinks(end).parent() == parent; ++end) {
            names.push_back(req.unlinks(end).name());
          }
          for (auto& u : core_->UnlinkMany(parent, names)) {
            UnlinkResult* r = resp->add_results();
            if (!u.attr.ok()) {
              r->set_errno_value(ErrnoOf(u.attr.status()));
              r->set_error(std::string(u.attr.status().message()));
              continue;
            }
            *r->mutable_done()->mutable_attr() = std::move(*u.attr);
            MoveFreed(u.freed, r->mutable_done()->mutable_freed());
            if (u.parent_attr) {
              *r->mutable_done()->mutable_parent_attr() = std::move(*u.parent_attr);
            } else {
              AddParentAttr(parent, r->mutable_done()->mutable_parent_attr());
            }
          }
          begin = end;
        }
        return absl::OkStatus();
      },
      // A long batch would hold the loop's other connections up.
      [](const UnlinkBatchRequest& req) { return req.unlinks_size() <= 8 ? Exec::kInline : Exec::kWorker; });
  service_.AddUnary<UnlinkRequest, RmdirResponse>(
      M(FilerMethod::kRmdir), "Rmdir", [this](const UnlinkRequest& req, RmdirResponse* resp) -> absl::Status {
        RETURN_IF_ERROR(core_->Rmdir(req.parent(), req.name()));
        AddParentAttr(req.parent(), resp->mutable_parent_attr());
        return absl::OkStatus();
      });
  service_.AddUnary<RenameRequest, RenameResponse>(
      M(FilerMethod::kRename), "Rename", [this](const RenameRequest& req, RenameResponse* resp) -> absl::Status {
        ASSIGN_OR_RETURN(RenameResult r,
                         core_->Rename(req.parent(), req.name(), req.new_parent(), req.new_name(), req.flags()));
        *resp->mutable_moved() = std::move(r.moved);
        if (r.replaced) *resp->mutable_replaced() = std::move(*r.replaced);
        MoveFreed(r.freed, resp->mutable_freed());
        AddParentAttr(req.parent(), resp->mutable_parent_attr());
        AddParentAttr(req.new_parent(), resp->mutable_new_parent_attr());
        return absl::OkStatus();
      });
  service_.AddUnary<SetAttrRequest, AttrResponse>(
      M(FilerMethod::kSetAttr), "SetAttr", [this](const SetAttrRequest& req, AttrResponse* resp) -> absl::Status {
        ASSIGN_OR_RETURN(*resp->mutable_attr(), core_->SetAttr(req));
        return absl::OkStatus();
      });
  service_.AddUnary<XattrRequest, XattrResponse>(
      M(FilerMethod::kGetXattr), "GetXattr", [this](const XattrRequest& req, XattrResponse* resp) -> absl::Status {
        ASSIGN_OR_RETURN(*resp->mutable_value(), core_->GetXattr(req.ino(), req.name()));
        return absl::OkStatus();
      });
  service_.AddUnary<XattrRequest, Empty>(M(FilerMethod::kSetXattr), "SetXattr",
                                         [this](const XattrRequest& req, Empty*) {
                                           return core_->SetXattr(req.ino(), req.name(), req.value(), req.flags());
                                         });
  service_.AddUnary<XattrRequest, XattrResponse>(
      M(FilerMethod::kListXattr), "ListXattr", [this](const XattrRequest& req, XattrResponse* resp) -> absl::Status {
        ASSIGN_OR_RETURN(auto names, core_->ListXattr(req.ino()));
        for (auto& n : names) resp->add_names(std::move(n));
        return absl::OkStatus();
      });
  service_.AddUnary<XattrRequest, Empty>(M(FilerMethod::kRemoveXattr), "RemoveXattr",
                                         [this](const XattrRequest& req, Empty*) {
                                           return core_->RemoveXattr(req.ino(), req.name());
                                         });
  service_.AddUnary<StatFsRequest, StatFsResponse>(
      M(FilerMethod::kStatFs), "StatFs", [this](const StatFsRequest&, StatFsResponse* resp) -> absl::Status {
        ASSIGN_OR_RETURN(*resp, core_->StatFs());
        return absl::OkStatus();
      });
}

void FilerRpcService::AddDataMethods() {
  service_.AddUnary<GetChunksRequest, GetChunksResponse>(
      M(FilerMethod::kGetChunks), "GetChunks",
      [this](const GetChunksRequest& req, GetChunksResponse* resp) -> absl::Status {
        ASSIGN_OR_RETURN(*resp, core_->GetChunks(req.ino()));
        return absl::OkStatus();
      });
  service_.AddUnary<CommitChunksRequest, CommitChunksResponse>(
      M(FilerMethod::kCommitChunks), "CommitChunks",
      [this](const CommitChunksRequest& req, CommitChunksResponse* resp) -> absl::Status {
        ASSIGN_OR_RETURN(*resp, core_->CommitChunks(req));
        return absl::OkStatus();
      },
      [](const CommitChunksRequest& req) { return req.sync() ? Exec::kWorker : Exec::kInline; });
  service_.AddUnary<CommitBatchRequest, CommitBatchResponse>(
      M(FilerMethod::kCommitBatch), "CommitBatch",
      [this](const CommitBatchRequest& req, CommitBatchResponse* resp) -> absl::Status {
        if (req.commits_size() > kMaxCommitBatch) {
          return absl::InvalidArgumentError(kelp::StrCat("a commit batch holds at most ", kMaxCommitBatch, " commits"));
        }
        // Each commit written without a sync, then one sync for those that asked: the
        // handler hand-offs and write groups of N synced commits, paid once.
        // Not announced as followed by a sync (SyncFollows): each commit's WAL pages would go
        // to the device by themselves, a submission each (sysbench rndrw, 16 threads: 14 % of
        // the filer's loops' CPU), where the one sync below writes them together.
        bool sync = false;
        for (const CommitChunksRequest& c : req.commits()) {
          CommitResult* r = resp->add_results();
          auto done = core_->CommitChunks(c, false);
          if (!done.ok()) {
            r->set_errno_value(ErrnoOf(done.status()));
            r->set_error(std::string(done.status().message()));
            continue;
          }
          *r->mutable_done() = std::move(*done);
          sync |= c.sync();
        }
        if (!sync) return absl::OkStatus();
        absl::Status s = core_->SyncAll();
        if (s.ok()) return s;
        // Applied, but not known to be durable: what a synced commit whose WAL sync failed answers.
        for (int i = 0; i < req.commits_size(); ++i) {
          CommitResult* r = resp->mutable_results(i);
          if (!req.commits(i).sync() || r->errno_value() != 0) continue;
          r->Clear();
          r->set_errno_value(ErrnoOf(s));
          r->set_error(std::string(s.message()));
        }
        return absl::OkStatus();
      },
      [](const CommitBatchRequest& req) {
        for (const CommitChunksRequest& c : req.commits()) {
          if (c.sync()) return Exec::kWorker;
        }
        return req.commits_size() <= 8 ? Exec::kInline : Exec::kWorker;
      });
  service_.AddUnary<WriteInlineRequest, AttrResponse>(
      M(FilerMethod::kWriteInline), "WriteInline",
      [this](const WriteInlineRequest& req, AttrResponse* resp) -> absl::Status {
        ASSIGN_OR_RETURN(*resp->mutable_attr(),
                         core_->WriteInline(req.ino(), req.data(), req.mtime_ns(), req.sync(),
                                            req.has_attrs() ? &req.attrs() : nullptr));
        return absl::OkStatus();
      },
      [](const WriteInlineRequest& req) { return req.sync() ? Exec::kWorker : Exec::kInline; });
  service_.AddUnary<FsyncRequest, Empty>(
      M(FilerMethod::kFsync), "Fsync", [this](const FsyncRequest& req, Empty*) { return core_->Fsync(req.ino()); },
      [](const FsyncRequest&) { return Exec::kWorker; });
  service_.AddUnary<cluster::AssignRequest, cluster::AssignResponse>(
      M(FilerMethod::kAssign), "Assign",
      [this](const cluster::AssignRequest& req, cluster::AssignResponse* resp) -> absl::Status {
        ASSIGN_OR_RETURN(*resp, core_->cluster()->Assign(req));
        return absl::OkStatus();
      },
      [](const cluster::AssignRequest&) { return Exec::kWorker; });
  service_.AddUnary<cluster::LookupVolumeRequest, cluster::LookupVolumeResponse>(
      M(FilerMethod::kLookupVolume), "LookupVolume",
      [this](const cluster::LookupVolumeRequest& req, cluster::LookupVolumeResponse* resp) -> absl::Status {
        ASSIGN_OR_RETURN(*resp, core_->cluster()->LookupVolume(req));
        return absl::OkStatus();
      },
      [this](const cluster::LookupVolumeRequest&) {
        return core_->cluster()->LookupMayWait() ? Exec::kWorker : Exec::kInline;
      });
}

void FilerRpcService::AddSessionMethods() {
  service_.AddUnary<OpenSessionRequest, OpenSessionResponse>(
      M(FilerMethod::kOpenSession), "OpenSession",
      [this](const OpenSessionRequest& req, OpenSessionResponse* resp) -> absl::Status {
        ASSIGN_OR_RETURN(*resp, core_->OpenSession(req.client()));
        return absl::OkStatus();
      });
  service_.AddUnary<KeepAliveRequest, Empty>(M(FilerMethod::kKeepAlive), "KeepAlive",
                                             [this](const KeepAliveRequest& req, Empty*) {
                                               std::vector<uint64_t> open(req.open_inodes().begin(),
                                                                          req.open_inodes().end());
                                               return core_->KeepAlive(req.session(), open, req.reattach());
                                             });
  service_.AddUnary<OpenRequest, GetChunksResponse>(
      M(FilerMethod::kOpen), "Open", [this](const OpenRequest& req, GetChunksResponse* resp) -> absl::Status {
        RETURN_IF_ERROR(core_->Open(req.session(), req.ino()));
        if (req.with_content()) {
          auto content = core_->GetChunks(req.ino());
          if (content.ok()) {
            *resp = std::move(*content);
            return absl::OkStatus();
          }
        }
        ASSIGN_OR_RETURN(*resp->mutable_attr(), core_->GetAttr(req.ino()));
        return absl::OkStatus();
      });
  service_.AddUnary<ReleaseRequest, ReleaseResponse>(
      M(FilerMethod::kRelease), "Release", [this](const ReleaseRequest& req, ReleaseResponse* resp) {
        std::vector<FreedBlob> freed;
        absl::Status s =
            core_->Release(req.session(), std::vector<uint64_t>(req.inodes().begin(), req.inodes().end()), &freed);
        MoveFreed(freed, resp->mutable_freed());
        return s;
      });
  service_.AddStream<SubscribeRequest>(
      M(FilerMethod::kSubscribe), "Subscribe",
      [this](const SubscribeRequest& req, rpc::StreamWriter& w) {
        // skip_own: this stream's connection names the client (Kelp-Client) whose calls' events
        // it leaves out.
        const uint64_t skip = req.skip_own() ? rpc::CallerId() : 0;
        ASSIGN_OR_RETURN(auto sub, core_->Subscribe(req.from_seq(), req.path_prefix(), skip));
        spdlog::debug("filer: subscriber {} from seq {}{}", req.client(), sub->cursor(),
                      skip != 0 ? " (without its own changes)" : "");
        uint64_t told = sub->cursor() - 1;  // the subscriber knows the stream is past this seq
        while (!shutdown_ && !w.cancelled()) {
          ASSIGN_OR_RETURN(auto events, sub->Next(opts_.subscribe_batch, opts_.subscribe_poll));
          if (events.empty()) {
            // It stepped over events it leaves out only (the subscriber's own changes, others
            // outside its subtree): an EVENT_NONE says how far, so that a stream resumed after a
            // break starts there, not before them.
            if (sub->cursor() - 1 > told) {
              Event progress;
              progress.set_kind(EVENT_NONE);
              progress.set_seq(sub->cursor() - 1);
              if (!w.Write(progress)) return absl::CancelledError("subscriber went away");
              told = progress.seq();
            }
            continue;
          }
          if (events.size() < opts_.subscribe_batch && opts_.subscribe_linger.count() > 0) {
            std::this_thread::sleep_for(opts_.subscribe_linger);
            ASSIGN_OR_RETURN(auto more, sub->Next(opts_.subscribe_batch - events.size(), std::chrono::milliseconds(0)));
            for (Event& e : more) events.push_back(std::move(e));
          }
          for (Event& e : events) {
            // A client's id stays its own: another that learnt it could name itself so and
            // have that client's stream skip its changes.
            e.clear_origin();
            if (!w.Write(e, /*flush=*/false)) return absl::CancelledError("subscriber went away");
          }
          if (!w.Flush()) return absl::CancelledError("subscriber went away");
          told = sub->cursor() - 1;
        }
        if (shutdown_) return absl::UnavailableError("filer is shutting down");
        return absl::CancelledError("subscriber went away");
      });
}

}  // namespace kelp::filer
