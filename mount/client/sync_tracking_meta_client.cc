#include "mount/client/sync_tracking_meta_client.h"

namespace kelp::mount {

SyncTrackingMetaClient::SyncTrackingMetaClient(MetaClient* inner)
    : inner_(inner),
      sent_metric_(MetricsRegistry::Default().GetCounter(
          "kelp_mount_filer_fsyncs_total", "fsyncs that reached the filer (a WAL sync was owed)", {{"result", "sent"}})),
      skipped_metric_(MetricsRegistry::Default().GetCounter(
          "kelp_mount_filer_fsyncs_total", "fsyncs that reached the filer (a WAL sync was owed)",
          {{"result", "skipped"}})) {}

void SyncTrackingMetaClient::MarkSynced(uint64_t covered) {
  uint64_t cur = synced_.load();
  while (cur < covered && !synced_.compare_exchange_weak(cur, covered)) {
  }
}

absl::Status SyncTrackingMetaClient::Fsync(uint64_t ino) {
  if (!SyncOwed()) {
    fsyncs_skipped_.fetch_add(1);
    skipped_metric_->Inc();
    return absl::OkStatus();
  }
  fsyncs_sent_.fetch_add(1);
  sent_metric_->Inc();
  return MaybeSync(true, false, [&] { return inner_->Fsync(ino); });
}

absl::StatusOr<filer::CommitChunksResponse> SyncTrackingMetaClient::CommitChunks(
    const filer::CommitChunksRequest& req) {
  return MaybeSync(req.sync(), true, [&] { return inner_->CommitChunks(req); });
}

absl::StatusOr<Attr> SyncTrackingMetaClient::WriteInline(uint64_t ino, std::string_view data, int64_t mtime_ns,
                                                         bool sync) {
  return MaybeSync(sync, true, [&] { return inner_->WriteInline(ino, data, mtime_ns, sync); });
}

// ---- mutations ----

absl::StatusOr<Attr> SyncTrackingMetaClient::Create(const filer::CreateRequest& req, Attr* dir_after) {
  return Mutate([&] { return inner_->Create(req, dir_after); });
}
absl::StatusOr<Attr> SyncTrackingMetaClient::Symlink(const filer::SymlinkRequest& req, Attr* dir_after) {
  return Mutate([&] { return inner_->Symlink(req, dir_after); });
}
absl::StatusOr<Attr> SyncTrackingMetaClient::Link(uint64_t ino, uint64_t new_parent, std::string_view new_name, Attr* dir_after) {
  return Mutate([&] { return inner_->Link(ino, new_parent, new_name, dir_after); });
}
absl::StatusOr<Attr> SyncTrackingMetaClient::Unlink(uint64_t parent, std::string_view name, Attr* dir_after) {
  return Mutate([&] { return inner_->Unlink(parent, name, dir_after); });
}
absl::Status SyncTrackingMetaClient::Rmdir(uint64_t parent, std::string_view name, Attr* dir_after) {
  return Mutate([&] { return inner_->Rmdir(parent, name, dir_after); });
}
absl::StatusOr<filer::RenameResponse> SyncTrackingMetaClient::Rename(const filer::RenameRequest& req) {
  return Mutate([&] { return inner_->Rename(req); });
}
absl::StatusOr<Attr> SyncTrackingMetaClient::SetAttr(const filer::SetAttrRequest& req) {
  return Mutate([&] { return inner_->SetAttr(req); });
}
absl::Status SyncTrackingMetaClient::SetXattr(uint64_t ino, std::string_view name, std::string_view value,
                                              uint32_t flags) {
  return Mutate([&] { return inner_->SetXattr(ino, name, value, flags); });
}
absl::Status SyncTrackingMetaClient::RemoveXattr(uint64_t ino, std::string_view name) {
  return Mutate([&] { return inner_->RemoveXattr(ino, name); });
}
// Open and Release change the filer's session state (which unlinked inodes stay alive), not
// what survives a crash; the rest only read.

// ---- forwarded unchanged ----

absl::StatusOr<Attr> SyncTrackingMetaClient::Lookup(uint64_t parent, std::string_view name) {
  return inner_->Lookup(parent, name);
}
absl::StatusOr<Attr> SyncTrackingMetaClient::GetAttr(uint64_t ino) { return inner_->GetAttr(ino); }
absl::Status SyncTrackingMetaClient::ReadDir(uint64_t ino, uint64_t cookie, uint32_t limit, bool with_attrs,
                                             const std::function<bool(filer::DirEntry&&)>& fn) {
  return inner_->ReadDir(ino, cookie, limit, with_attrs, fn);
}
absl::StatusOr<std::string> SyncTrackingMetaClient::GetXattr(uint64_t ino, std::string_view name) {
  return inner_->GetXattr(ino, name);
}
absl::StatusOr<std::vector<std::string>> SyncTrackingMetaClient::ListXattr(uint64_t ino) {
  return inner_->ListXattr(ino);
}
absl::StatusOr<filer::StatFsResponse> SyncTrackingMetaClient::StatFs() { return inner_->StatFs(); }
absl::StatusOr<filer::GetChunksResponse> SyncTrackingMetaClient::GetChunks(uint64_t ino) {
  return inner_->GetChunks(ino);
}
absl::StatusOr<filer::OpenSessionResponse> SyncTrackingMetaClient::OpenSession(std::string_view client) {
  return inner_->OpenSession(client);
}
absl::Status SyncTrackingMetaClient::KeepAlive(std::string_view session, const std::vector<uint64_t>& open_inodes,
                                               bool reattach) {
  return inner_->KeepAlive(session, open_inodes, reattach);
}
absl::Status SyncTrackingMetaClient::Open(std::string_view session, uint64_t ino) {
  return inner_->Open(session, ino);
}
absl::Status SyncTrackingMetaClient::Release(std::string_view session, uint64_t ino) {
  return inner_->Release(session, ino);
}
absl::StatusOr<cluster::AssignResponse> SyncTrackingMetaClient::Assign(uint32_t count, std::string_view replication,
                                                                       std::string_view collection) {
  return inner_->Assign(count, replication, collection);
}
absl::StatusOr<cluster::LookupVolumeResponse> SyncTrackingMetaClient::LookupVolume(
    const std::vector<uint32_t>& volume_ids) {
  return inner_->LookupVolume(volume_ids);
}
absl::StatusOr<std::unique_ptr<EventStream>> SyncTrackingMetaClient::Subscribe(uint64_t from_seq,
                                                                              std::string_view path_prefix) {
  return inner_->Subscribe(from_seq, path_prefix);
}

}  // namespace kelp::mount
