#include "filer/client/filer_client.h"

#include <random>

#include "shared/coding.h"
#include "shared/security/jwt.h"
#include "shared/security/security.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::filer {
namespace {

constexpr const char* kMethodNames[] = {
    "",          "Lookup",      "GetAttr",      "ReadDir",     "Create",      "Symlink",  "Link",
    "Unlink",    "Rmdir",       "Rename",       "SetAttr",     "GetXattr",    "SetXattr", "ListXattr",
    "RemoveXattr", "StatFs",    "GetChunks",    "CommitChunks", "WriteInline", "Fsync",   "OpenSession",
    "KeepAlive", "Open",        "Release",      "Assign",      "LookupVolume", "Subscribe", "ResolvePath",
    "UnlinkBatch", "CommitBatch"};
constexpr size_t kMethods = sizeof(kMethodNames) / sizeof(kMethodNames[0]);
static_assert(kMethods == MethodNumber(kLastFilerMethod) + 1, "a name for every method of filer_methods.h");

// A secured filer takes the metadata transport only with a token of its write key
// (docs/security.md): signed here when this process's security.toml holds it.
std::string UpgradeAuthorization() {
  auto sec = security::Current();
  if (!sec->filer_write.enabled()) return {};
  return "Authorization: Bearer " + security::SignFilerToken(sec->filer_write, 60) + "\r\n";
}

// With [grpc] certificates the connection is mutual TLS, as gRPC is (docs/security.md).
rpc::Channel::Options ChannelOptions(const FilerClientOptions& o, uint64_t client_id) {
  rpc::Channel::Options c;
  c.connect_timeout_ms = static_cast<int>(o.connect_timeout.count());
  c.max_payload = o.max_receive_bytes;
  c.upgrade_headers = [client = rpc::ClientIdHeader(client_id)] {
    return UpgradeAuthorization() + client;
  };
  c.tls = security::ClientSslCtx();
  c.reply_poll = o.reply_poll;
  return c;
}

uint64_t NewClientId() {
  std::mt19937_64 rng{std::random_device{}()};
  uint64_t id = 0;
  while (id == 0) id = rng();
  return id;
}

}  // namespace

FilerClient::FilerClient(std::string filer, FilerClientOptions options)
    : opts_(std::move(options)), client_id_(NewClientId()) {
  const rpc::Channel::Options copts = ChannelOptions(opts_, client_id_);
  std::vector<std::string_view> list = SplitSkipEmpty(filer, ',');
  if (list.size() <= 1) {
    channels_.push_back(std::make_unique<rpc::Channel>(std::move(filer), copts));  // as given
  } else {
    for (std::string_view a : list) channels_.push_back(std::make_unique<rpc::Channel>(std::string(a), copts));
  }
  auto& reg = MetricsRegistry::Default();
  if (channels_.size() > 1) {
    failovers_metric_ = reg.GetCounter("kelp_filer_client_failovers_total",
                                       "Moves to the next filer of the list after one could not be reached.",
                                       {{"client", opts_.metrics_label}});
  }
  calls_ = std::make_unique<std::atomic<uint64_t>[]>(kMethods);
  call_metrics_.resize(kMethods, nullptr);
  for (size_t i = 1; i < kMethods; ++i) {
    call_metrics_[i] = reg.GetCounter("kelp_filer_client_calls_total", "Filer metadata calls sent, by method.",
                               {{"client", opts_.metrics_label}, {"method", kMethodNames[i]}});
  }
  const char* help = "fsyncs that reached the filer (a WAL sync was owed) or were skipped";
  fsyncs_sent_metric_ = reg.GetCounter("kelp_filer_client_fsyncs_total", help,
                                {{"client", opts_.metrics_label}, {"result", "sent"}});
  fsyncs_skipped_metric_ = reg.GetCounter("kelp_filer_client_fsyncs_total", help,
                                   {{"client", opts_.metrics_label}, {"result", "skipped"}});
}

FilerClient::~FilerClient() = default;

absl::Status FilerClient::Connect(std::chrono::milliseconds timeout) {
  if (channels_.size() == 1) {
    absl::Status s = channels_[0]->Connect(timeout);
    if (s.ok()) return s;
    return absl::UnavailableError(kelp::StrCat("cannot reach the filer at ", channels_[0]->address(), " within ",
                                               timeout.count(), " ms (", s.message(),
                                               "); is `kelp filer` or `kelp server` running?"));
  }
  std::string errors;
  for (size_t n = 0; n < channels_.size(); ++n) {
    size_t at = current_.load();
    absl::Status s = channels_[at]->Connect(timeout);
    if (s.ok()) return s;
    errors += kelp::StrCat(errors.empty() ? "" : "; ", channels_[at]->address(), ": ", s.message());
    MoveOn(at);
  }
  return absl::UnavailableError(kelp::StrCat("cannot reach any filer within ", timeout.count(), " ms each (",
                                             errors, "); is `kelp filer` running?"));
}

void FilerClient::MoveOn(size_t from) {
  size_t to = (from + 1) % channels_.size();
  if (current_.compare_exchange_strong(from, to)) {
    ++failovers_;
    failovers_metric_->Inc();
  }
}

uint64_t FilerClient::calls(FilerMethod m) const {
  size_t i = MethodNumber(m);
  return i < kMethods ? calls_[i].load() : 0;
}

void FilerClient::CountCall(FilerMethod m) {
  ++calls_[MethodNumber(m)];
  call_metrics_[MethodNumber(m)]->Inc();
}

// With a lone filer, a connection is looked at before a call (one poll(2), which cost 5-10 %
// of a lookup's rate when made before every call) only when the filer has not answered on it
// for this long: a filer that died and came back was silent for far longer.
constexpr std::chrono::milliseconds kAnsweredRecently{10};

template <typename Resp, typename Req>
absl::StatusOr<Resp> FilerClient::Call(FilerMethod m, const Req& req, Kind kind) {
  Resp resp;
  CountCall(m);
  absl::Status s;
  if (channels_.size() == 1) {
    rpc::Channel& channel = *channels_[0];
    // A connection the filer closed (it restarted since the last call) is made afresh before
    // anything is sent on it, so that even a mutation, which is never sent twice, goes through.
    channel.DropIfClosed(kAnsweredRecently);
    s = channel.Call(MethodNumber(m), req, &resp, opts_.rpc_timeout);
    if (kind == Kind::kRead && s.code() == absl::StatusCode::kUnavailable) {
      // The connection failed (a filer restart): a read may be asked again on a fresh one.
      s = channel.Call(MethodNumber(m), req, &resp, opts_.rpc_timeout);
    }
  } else {
    // Each filer of the list at most once, from the current one.
    for (size_t n = 0; n < channels_.size(); ++n) {
      size_t at = current_.load();
      rpc::Channel& channel = *channels_[at];
      // Connected first (at once when it is; a connection the filer closed, e.g. as it died,
      // is dropped and made again), so a filer that cannot be reached is known before
      // anything was sent: then any call may go to the next. Looked at before every call,
      // unlike the lone filer's: a filer can die right after answering, and the next one is
      // up at once.
      channel.DropIfClosed();
      s = channel.Connect(opts_.connect_timeout);
      if (!s.ok()) {
        s = absl::UnavailableError(kelp::StrCat("filer ", channel.address(), ": ", s.message()));
        MoveOn(at);
        continue;
      }
      s = channel.Call(MethodNumber(m), req, &resp, opts_.rpc_timeout);
      if (s.code() == absl::StatusCode::kDeadlineExceeded) {
        // No answer in time (a hung filer, or a machine gone without closing anything): the
        // call's time is spent, but the next call goes to the next filer.
        MoveOn(at);
        break;
      }
      if (s.code() != absl::StatusCode::kUnavailable) break;
      // The connection failed under the call: the filer may be gone (or restarting; the
      // next call finds out). A read goes to the next filer; a mutation may have been applied.
      MoveOn(at);
      if (kind != Kind::kRead) break;
    }
  }
  // A mutation counts once it returned, whatever the result: a failed one may have been
  // applied before the error reached us.
  if (kind == Kind::kMutation) mutations_.fetch_add(1);
  if (!s.ok()) return s;
  return resp;
}

template <typename Resp, typename Req>
absl::StatusOr<Resp> FilerClient::MaybeSync(FilerMethod m, const Req& req, bool sync, bool mutates) {
  if (!sync) return Call<Resp>(m, req, mutates ? Kind::kMutation : Kind::kRead);
  ++synced_calls_;
  uint64_t covered = mutations_.load();
  auto r = Call<Resp>(m, req, mutates ? Kind::kOnce : Kind::kRead);
  if (r.ok()) {
    MarkSynced(covered);
  } else if (mutates) {
    mutations_.fetch_add(1);  // maybe applied, not known to be synced
  }
  return r;
}

void FilerClient::MarkSynced(uint64_t covered) {
  uint64_t cur = synced_.load();
  while (cur < covered && !synced_.compare_exchange_weak(cur, covered)) {
  }
}

// ---- Reads ----

absl::StatusOr<Attr> FilerClient::Lookup(uint64_t parent, std::string_view name) {
  LookupRequest req;
  req.set_parent(parent);
  req.set_name(std::string(name));
  ASSIGN_OR_RETURN(AttrResponse r, Call<AttrResponse>(FilerMethod::kLookup, req, Kind::kRead));
  return std::move(*r.mutable_attr());
}

absl::StatusOr<Attr> FilerClient::GetAttr(uint64_t ino) {
  GetAttrRequest req;
  req.set_ino(ino);
  ASSIGN_OR_RETURN(AttrResponse r, Call<AttrResponse>(FilerMethod::kGetAttr, req, Kind::kRead));
  return std::move(*r.mutable_attr());
}

absl::StatusOr<Attr> FilerClient::ResolvePath(std::string_view path) {
  ResolvePathRequest req;
  req.set_path(std::string(path));
  ASSIGN_OR_RETURN(AttrResponse r, Call<AttrResponse>(FilerMethod::kResolvePath, req, Kind::kRead));
  return std::move(*r.mutable_attr());
}

absl::StatusOr<ReadDirResponse> FilerClient::ReadDirPage(uint64_t ino, uint64_t cookie, uint32_t limit,
                                                         bool with_attrs) {
  ReadDirRequest req;
  req.set_ino(ino);
  req.set_cookie(cookie);
  req.set_limit(limit);
  req.set_with_attrs(with_attrs);
  return Call<ReadDirResponse>(FilerMethod::kReadDir, req, Kind::kRead);
}

absl::Status FilerClient::ReadDir(uint64_t ino, uint64_t cookie, uint32_t limit, bool with_attrs,
                                  const std::function<bool(DirEntry&&)>& fn) {
  uint64_t delivered = 0;
  for (;;) {
    uint32_t page = opts_.readdir_page;
    if (limit != 0) page = static_cast<uint32_t>(std::min<uint64_t>(page, limit - delivered));
    ASSIGN_OR_RETURN(ReadDirResponse r, ReadDirPage(ino, cookie, page, with_attrs));
    for (DirEntry& e : *r.mutable_entries()) {
      cookie = e.cookie();
      ++delivered;
      if (!fn(std::move(e))) return absl::OkStatus();
    }
    if (r.eof() || (limit != 0 && delivered >= limit) || r.entries_size() == 0) return absl::OkStatus();
  }
}

// ---- Namespace ----

namespace {

void TakeDirAfter(AttrResponse& r, Attr* dir_after) {
  if (dir_after != nullptr && r.has_parent_attr()) *dir_after = std::move(*r.mutable_parent_attr());
}

}  // namespace

absl::StatusOr<Attr> FilerClient::Create(const CreateRequest& req, Attr* dir_after) {
  ASSIGN_OR_RETURN(AttrResponse r, Call<AttrResponse>(FilerMethod::kCreate, req, Kind::kMutation));
  TakeDirAfter(r, dir_after);
  return std::move(*r.mutable_attr());
}

absl::StatusOr<Attr> FilerClient::Mkdir(uint64_t parent, std::string_view name, uint32_t mode, uint32_t uid,
                                        uint32_t gid, Attr* dir_after) {
  CreateRequest req;
  req.set_parent(parent);
  req.set_name(std::string(name));
  req.set_mode(0040000 | (mode & 07777));
  req.set_uid(uid);
  req.set_gid(gid);
  req.set_exclusive(true);
  return Create(req, dir_after);
}

absl::StatusOr<Attr> FilerClient::Symlink(const SymlinkRequest& req, Attr* dir_after) {
  ASSIGN_OR_RETURN(AttrResponse r, Call<AttrResponse>(FilerMethod::kSymlink, req, Kind::kMutation));
  TakeDirAfter(r, dir_after);
  return std::move(*r.mutable_attr());
}

absl::StatusOr<Attr> FilerClient::Symlink(uint64_t parent, std::string_view name, std::string_view target,
                                          uint32_t uid, uint32_t gid) {
  SymlinkRequest req;
  req.set_parent(parent);
  req.set_name(std::string(name));
  req.set_target(std::string(target));
  req.set_uid(uid);
  req.set_gid(gid);
  return Symlink(req);
}

absl::StatusOr<Attr> FilerClient::Link(uint64_t ino, uint64_t new_parent, std::string_view new_name,
                                       Attr* dir_after) {
  LinkRequest req;
  req.set_ino(ino);
  req.set_new_parent(new_parent);
  req.set_new_name(std::string(new_name));
  ASSIGN_OR_RETURN(AttrResponse r, Call<AttrResponse>(FilerMethod::kLink, req, Kind::kMutation));
  TakeDirAfter(r, dir_after);
  return std::move(*r.mutable_attr());
}

absl::StatusOr<Attr> FilerClient::Unlink(uint64_t parent, std::string_view name, Attr* dir_after,
                                         google::protobuf::RepeatedPtrField<FreedBlob>* freed) {
  UnlinkRequest req;
  req.set_parent(parent);
  req.set_name(std::string(name));
  ASSIGN_OR_RETURN(UnlinkResponse r, Call<UnlinkResponse>(FilerMethod::kUnlink, req, Kind::kMutation));
  if (dir_after != nullptr && r.has_parent_attr()) *dir_after = std::move(*r.mutable_parent_attr());
  if (freed != nullptr) freed->Swap(r.mutable_freed());
  return std::move(*r.mutable_attr());
}

absl::StatusOr<UnlinkBatchResponse> FilerClient::UnlinkBatch(const UnlinkBatchRequest& req) {
  return Call<UnlinkBatchResponse>(FilerMethod::kUnlinkBatch, req, Kind::kMutation);
}

absl::Status FilerClient::Rmdir(uint64_t parent, std::string_view name, Attr* dir_after) {
  UnlinkRequest req;
  req.set_parent(parent);
  req.set_name(std::string(name));
  ASSIGN_OR_RETURN(RmdirResponse r, Call<RmdirResponse>(FilerMethod::kRmdir, req, Kind::kMutation));
  if (dir_after != nullptr && r.has_parent_attr()) *dir_after = std::move(*r.mutable_parent_attr());
  return absl::OkStatus();
}

absl::StatusOr<RenameResponse> FilerClient::Rename(const RenameRequest& req) {
  return Call<RenameResponse>(FilerMethod::kRename, req, Kind::kMutation);
}

absl::StatusOr<RenameResponse> FilerClient::Rename(uint64_t parent, std::string_view name, uint64_t new_parent,
                                                   std::string_view new_name, uint32_t flags) {
  RenameRequest req;
  req.set_parent(parent);
  req.set_name(std::string(name));
  req.set_new_parent(new_parent);
  req.set_new_name(std::string(new_name));
  req.set_flags(flags);
  return Rename(req);
}

absl::StatusOr<Attr> FilerClient::SetAttr(const SetAttrRequest& req) {
  ASSIGN_OR_RETURN(AttrResponse r, Call<AttrResponse>(FilerMethod::kSetAttr, req, Kind::kMutation));
  return std::move(*r.mutable_attr());
}

// ---- Extended attributes ----

absl::StatusOr<std::string> FilerClient::GetXattr(uint64_t ino, std::string_view name) {
  XattrRequest req;
  req.set_ino(ino);
  req.set_name(std::string(name));
  ASSIGN_OR_RETURN(XattrResponse r, Call<XattrResponse>(FilerMethod::kGetXattr, req, Kind::kRead));
  return std::move(*r.mutable_value());
}

absl::Status FilerClient::SetXattr(uint64_t ino, std::string_view name, std::string_view value, uint32_t flags) {
  XattrRequest req;
  req.set_ino(ino);
  req.set_name(std::string(name));
  req.set_value(std::string(value));
  req.set_flags(flags);
  return Call<Empty>(FilerMethod::kSetXattr, req, Kind::kMutation).status();
}

absl::StatusOr<std::vector<std::string>> FilerClient::ListXattr(uint64_t ino) {
  XattrRequest req;
  req.set_ino(ino);
  ASSIGN_OR_RETURN(XattrResponse r, Call<XattrResponse>(FilerMethod::kListXattr, req, Kind::kRead));
  return std::vector<std::string>(r.names().begin(), r.names().end());
}

absl::Status FilerClient::RemoveXattr(uint64_t ino, std::string_view name) {
  XattrRequest req;
  req.set_ino(ino);
  req.set_name(std::string(name));
  return Call<Empty>(FilerMethod::kRemoveXattr, req, Kind::kMutation).status();
}

// ---- Data ----

absl::StatusOr<StatFsResponse> FilerClient::StatFs() {
  return Call<StatFsResponse>(FilerMethod::kStatFs, StatFsRequest(), Kind::kRead);
}

absl::StatusOr<GetChunksResponse> FilerClient::GetChunks(uint64_t ino) {
  GetChunksRequest req;
  req.set_ino(ino);
  return Call<GetChunksResponse>(FilerMethod::kGetChunks, req, Kind::kRead);
}

// What one CommitBatch carries at most: the filer's limit (FilerRpcService::kMaxCommitBatch),
// and about 16 MiB (a commit journals at most 1 MiB).
constexpr size_t kCommitBatchMax = 64;
constexpr size_t kCommitBatchBytes = 16 << 20;
// Batches out at once. One: the commits that come while a batch and its WAL sync run all go
// in the next batch. Two were chosen once (sysbench rndrw, 16 threads: 2,658 / 2,881 reads/s
// with one, 3,111 / 3,357 with two), but on this code they did no better (six rounds of 20 s
// each in turn, load 3-7: 4,638 / 4,277 / 4,318 / 3,862 / 3,956 / 4,120 with one, 4,411 /
// 4,646 / 4,038 / 3,477 / 3,505 / 3,758 with two), and with one the filer synced its WAL 40 %
// less often and spent a sixth less CPU.
constexpr int kCommitsOut = 1;

absl::StatusOr<CommitChunksResponse> FilerClient::CommitChunks(const CommitChunksRequest& req) {
  if (!req.sync()) return MaybeSync<CommitChunksResponse>(FilerMethod::kCommitChunks, req, false, true);
  // Group commit, as RocksDB's write group does it: the first goes alone and at once; the ones
  // that come while it is out (kCommitsOut) wait, and the oldest of them takes all that are
  // there when it returns. 40 files fsynced together were 40 calls, 40 hand-offs to a
  // filer worker and 40 joins of a write group; now a few batches.
  auto me = std::make_shared<QueuedCommit>();
  me->req = &req;
  std::vector<std::shared_ptr<QueuedCommit>> batch;
  std::shared_ptr<QueuedCommit> next;
  {
    MutexLock lock(commit_mu_);
    commit_queue_.push_back(me);
    while (!me->done && (me->taken || commits_out_ >= kCommitsOut || commit_queue_.front() != me)) {
      me->turn.Wait(lock);
    }
    if (me->done) return std::move(me->result);
    ++commits_out_;
    size_t bytes = 0;
    while (!commit_queue_.empty() && batch.size() < kCommitBatchMax) {
      size_t b = commit_queue_.front()->req->ByteSizeLong();
      if (!batch.empty() && bytes + b > kCommitBatchBytes) break;
      bytes += b;
      commit_queue_.front()->taken = true;
      batch.push_back(std::move(commit_queue_.front()));
      commit_queue_.pop_front();
    }
    next = NextCommitLocked();  // what did not fit may go as a batch of its own
  }
  if (next) next->turn.NotifyOne();
  SendCommits(batch);
  {
    MutexLock lock(commit_mu_);
    for (auto& q : batch) q->done = true;
    --commits_out_;
    next = NextCommitLocked();
  }
  // Each waiter is woken by name, with the lock free: waking them all (a condition variable
  // they shared) woke the queued ones too, only to sleep again, and each woken under the lock
  // first waited for it (sysbench rndrw, 16 threads: this queue made 44 % of the mount's
  // futex calls).
  for (auto& q : batch) {
    if (q != me) q->turn.NotifyOne();
  }
  if (next) next->turn.NotifyOne();
  return std::move(me->result);
}

std::shared_ptr<FilerClient::QueuedCommit> FilerClient::NextCommitLocked() {
  if (!commit_queue_.empty() && commits_out_ < kCommitsOut) return commit_queue_.front();
  return nullptr;
}

void FilerClient::SendCommits(const std::vector<std::shared_ptr<QueuedCommit>>& batch) {
  if (batch.size() == 1 || no_commit_batch_.load()) {
    for (const auto& q : batch) {
      q->result = MaybeSync<CommitChunksResponse>(FilerMethod::kCommitChunks, *q->req, true, true);
    }
    return;
  }
  // A CommitBatchRequest put together as protobuf's wire format has it, each commit serialized
  // straight into it (not copied into a message first: they carry the written bytes): its
  // field `repeated CommitChunksRequest commits = 1` is, per element, the tag (field 1,
  // length-delimited), the length, and the element's bytes.
  rpc::SerializedRequest req;
  std::vector<size_t> sizes;
  sizes.reserve(batch.size());
  size_t bytes = 0;
  for (const auto& q : batch) {
    sizes.push_back(q->req->ByteSizeLong());  // also caches the sizes SerializeWithCachedSizes uses
    bytes += sizes.back() + 11;               // tag and length take at most 11 bytes
  }
  req.bytes.reserve(bytes);
  for (size_t i = 0; i < batch.size(); ++i) {
    req.bytes.push_back(static_cast<char>((CommitBatchRequest::kCommitsFieldNumber << 3) | 2));
    PutVarint64(&req.bytes, sizes[i]);
    size_t at = req.bytes.size();
    req.bytes.resize(at + sizes[i]);
    batch[i]->req->SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(req.bytes.data() + at));
  }
  ++synced_calls_;
  uint64_t covered = mutations_.load();
  auto r = Call<CommitBatchResponse>(FilerMethod::kCommitBatch, req, Kind::kOnce);
  if (r.status().code() == absl::StatusCode::kUnimplemented) {
    no_commit_batch_ = true;  // a filer older than CommitBatch: nothing was applied
    return SendCommits(batch);
  }
  if (r.ok() && static_cast<size_t>(r->results_size()) != batch.size()) {
    r = absl::InternalError(kelp::StrCat("the filer answered ", r->results_size(), " results for ", batch.size(),
                                         " commits"));
  }
  if (!r.ok()) {
    for (const auto& q : batch) q->result = r.status();
    mutations_.fetch_add(1);  // maybe applied, not known to be synced
    return;
  }
  bool all_ok = true;
  for (size_t i = 0; i < batch.size(); ++i) {
    CommitResult& res = *r->mutable_results(static_cast<int>(i));
    if (res.errno_value() != 0) {
      batch[i]->result = PosixError(res.errno_value(), res.error());
      all_ok = false;
    } else {
      batch[i]->result = std::move(*res.mutable_done());
    }
  }
  if (all_ok) {
    MarkSynced(covered);
  } else {
    mutations_.fetch_add(1);
  }
}

absl::StatusOr<CommitBatchResponse> FilerClient::CommitBatch(const CommitBatchRequest& req) {
  return Call<CommitBatchResponse>(FilerMethod::kCommitBatch, req, Kind::kMutation);
}

absl::StatusOr<Attr> FilerClient::WriteInline(const WriteInlineRequest& req) {
  ASSIGN_OR_RETURN(AttrResponse r, MaybeSync<AttrResponse>(FilerMethod::kWriteInline, req, req.sync(), true));
  return std::move(*r.mutable_attr());
}

absl::StatusOr<Attr> FilerClient::WriteInline(uint64_t ino, std::string_view data, int64_t mtime_ns, bool sync) {
  WriteInlineRequest req;
  req.set_ino(ino);
  req.set_data(std::string(data));
  req.set_mtime_ns(mtime_ns);
  req.set_sync(sync);
  return WriteInline(req);
}

absl::Status FilerClient::Fsync(uint64_t ino) {
  if (!SyncOwed()) {
    ++fsyncs_skipped_;
    fsyncs_skipped_metric_->Inc();
    return absl::OkStatus();
  }
  ++fsyncs_sent_;
  fsyncs_sent_metric_->Inc();
  FsyncRequest req;
  req.set_ino(ino);
  return MaybeSync<Empty>(FilerMethod::kFsync, req, true, false).status();
}

// ---- Sessions ----

absl::StatusOr<OpenSessionResponse> FilerClient::OpenSession(std::string_view client) {
  OpenSessionRequest req;
  req.set_client(std::string(client));
  return Call<OpenSessionResponse>(FilerMethod::kOpenSession, req, Kind::kRead);
}

absl::Status FilerClient::KeepAlive(std::string_view session, const std::vector<uint64_t>& open_inodes,
                                    bool reattach) {
  KeepAliveRequest req;
  req.set_session(std::string(session));
  for (uint64_t ino : open_inodes) req.add_open_inodes(ino);
  req.set_reattach(reattach);
  return Call<Empty>(FilerMethod::kKeepAlive, req, Kind::kRead).status();
}

absl::StatusOr<GetChunksResponse> FilerClient::Open(std::string_view session, uint64_t ino, bool with_content) {
  OpenRequest req;
  req.set_session(std::string(session));
  req.set_ino(ino);
  req.set_with_content(with_content);
  return Call<GetChunksResponse>(FilerMethod::kOpen, req, Kind::kOnce);
}

absl::Status FilerClient::Release(std::string_view session, const std::vector<uint64_t>& inodes,
                                  google::protobuf::RepeatedPtrField<FreedBlob>* freed) {
  ReleaseRequest req;
  req.set_session(std::string(session));
  for (uint64_t ino : inodes) req.add_inodes(ino);
  ASSIGN_OR_RETURN(ReleaseResponse r, Call<ReleaseResponse>(FilerMethod::kRelease, req, Kind::kOnce));
  if (freed != nullptr) freed->Swap(r.mutable_freed());
  return absl::OkStatus();
}

// ---- Cluster ----

absl::StatusOr<cluster::AssignResponse> FilerClient::Assign(const cluster::AssignRequest& req) {
  return Call<cluster::AssignResponse>(FilerMethod::kAssign, req, Kind::kRead);
}

absl::StatusOr<cluster::LookupVolumeResponse> FilerClient::LookupVolume(const cluster::LookupVolumeRequest& req) {
  return Call<cluster::LookupVolumeResponse>(FilerMethod::kLookupVolume, req, Kind::kRead);
}

// ---- Events ----

absl::StatusOr<std::unique_ptr<FilerClient::EventStream>> FilerClient::Subscribe(
    uint64_t from_seq, std::string_view path_prefix, std::string_view client, bool skip_own) {
  SubscribeRequest req;
  req.set_from_seq(from_seq);
  req.set_path_prefix(std::string(path_prefix));
  req.set_client(std::string(client));
  req.set_skip_own(skip_own);
  CountCall(FilerMethod::kSubscribe);
  absl::StatusOr<std::unique_ptr<rpc::ClientStream>> stream;
  for (size_t n = 0; n < channels_.size(); ++n) {
    size_t at = current_.load();
    stream = channels_[at]->OpenStream(MethodNumber(FilerMethod::kSubscribe), req, opts_.connect_timeout);
    if (stream.ok() || channels_.size() == 1 || stream.status().code() != absl::StatusCode::kUnavailable) break;
    MoveOn(at);  // nothing was subscribed there: the next filer streams the same log
  }
  if (!stream.ok()) return stream.status();
  return std::unique_ptr<EventStream>(new EventStream(std::move(*stream)));
}

}  // namespace kelp::filer
