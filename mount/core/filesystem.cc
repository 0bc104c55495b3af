#include "mount/core/filesystem.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>

#include "mount/core/event_subscriber.h"
#include "shared/metrics.h"
#include "shared/log.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::mount {

Filesystem::Filesystem(FilerClient* meta, BlobStore* blobs, ChunkCache* cache, FsOptions options)
    : meta_(meta),
      blobs_(blobs),
      opts_(std::move(options)),
      cache_(opts_.attr_ttl, opts_.entry_ttl),
      // Events outside a -filer.path subtree do not reach this mount, and without the event
      // stream nothing keeps a listing current.
      track_listings_(opts_.subscribe && (opts_.filer_path.empty() || opts_.filer_path == "/")),
      budget_(opts_.write_buffer),
      removes_(opts_.unlink_behind),
      session_(meta, [this](const auto& freed) { fetcher_->Forget(freed); }) {
  upload_pool_ = std::make_unique<ThreadPool>("kelp-upload", opts_.concurrent_writers, opts_.concurrent_writers * 2);
  prefetch_pool_ = std::make_unique<ThreadPool>("kelp-prefetch", 4, 64);
  // As many commits at once as the filer's write group usually takes in one WAL sync.
  sync_ahead_pool_ = std::make_unique<ThreadPool>("kelp-syncahead", kSyncAheadThreads, 1024);
  sync_ahead_files_ = MetricsRegistry::Default().GetCounter(
      "kelp_mount_sync_ahead_files_total", "files whose small dirty data an fsync of another file committed durably");
  unlinks_behind_ = MetricsRegistry::Default().GetCounter(
      "kelp_mount_unlinks_behind_total", "unlinks answered at once and sent to the filer in the background");
  unlinks_behind_failed_ = MetricsRegistry::Default().GetCounter(
      "kelp_mount_unlinks_behind_failed_total",
      "unlinks behind the filer refused (not for a name already gone): the name is shown again");
  if (opts_.unlink_behind > 0) unlink_thread_ = std::thread([this] { SendUnlinksBehind(); });
  ChunkFetcher::Options fo;
  fo.window = opts_.read_ahead;
  fetcher_ = std::make_unique<ChunkFetcher>(blobs_, cache, prefetch_pool_.get(), fo);
  file_ctx_.meta = meta_;
  file_ctx_.blobs = blobs_;
  file_ctx_.fetcher = fetcher_.get();
  file_ctx_.budget = &budget_;
  file_ctx_.uploads = upload_pool_.get();
  file_ctx_.chunk_size = opts_.chunk_size;
  file_ctx_.max_inline = opts_.max_inline;
  file_ctx_.journal_max = opts_.journal_max;
  file_ctx_.journal_memory = opts_.journal_memory;
  file_ctx_.on_attr = [this](const Attr& a) {
    cache_.PutAttr(a);
    inodes_.SetCachedVersion(a.ino(), a.version());
  };
  budget_.SetPressureCallback([this] { OnWritePressure(); });
}

Filesystem::~Filesystem() { Stop(); }

absl::Status Filesystem::Start() {
  uint64_t ino = 1;
  std::string_view path = opts_.filer_path;
  size_t pos = 0;
  while (pos < path.size()) {
    size_t next = path.find('/', pos);
    if (next == std::string_view::npos) next = path.size();
    std::string_view comp = path.substr(pos, next - pos);
    pos = next + 1;
    if (comp.empty() || comp == ".") continue;
    auto a = meta_->Lookup(ino, comp);
    if (!a.ok()) {
      return absl::Status(a.status().code(),
                          kelp::StrCat("-filer.path ", opts_.filer_path, ": ", a.status().message()));
    }
    if (!S_ISDIR(a->mode())) return PosixError(ENOTDIR, kelp::StrCat("-filer.path ", opts_.filer_path, " is not a directory"));
    ino = a->ino();
  }
  auto root = meta_->GetAttr(ino);
  if (!root.ok()) {
    return absl::Status(root.status().code(), kelp::StrCat("cannot read the filer's root: ", root.status().ToString(),
                                                           ""));
  }
  root_ = ino;
  if (absl::Status s = session_.Start(opts_.client_name); !s.ok()) {
    return absl::Status(s.code(), kelp::StrCat("cannot open a filer session: ", s.ToString()));
  }
  if (opts_.writeback_interval.count() > 0) file_ctx_.closed_unsynced.StartWriteback(blobs_, opts_.writeback_interval);
  return absl::OkStatus();
}

void Filesystem::StartEvents(KernelNotifier* notifier) {
  if (!opts_.subscribe || subscriber_) return;
  subscriber_ = std::make_unique<EventSubscriber>(meta_, this, notifier, opts_.filer_path, opts_.client_name);
  subscriber_->Start();
}

bool Filesystem::BackgroundBusy() const {
  return removes_.Any() || upload_pool_->busy() > 0 || sync_ahead_pool_->busy() > 0 ||
         prefetch_pool_->busy() > 0;
}

uint64_t Filesystem::last_event_seq() const { return subscriber_ ? subscriber_->last_seq() : 0; }

absl::Status Filesystem::FlushAll() {
  removes_.WaitAll();
  absl::Status first;
  for (const auto& f : inodes_.OpenFiles()) {
    absl::Status s = f->Flush(false);
    if (!s.ok()) {
      spdlog::error("flush of inode {} failed: {}", f->ino(), s);
      if (first.ok()) first = s;
    }
  }
  return first;
}

void Filesystem::Stop() {
  if (stopped_.exchange(true)) return;
  sync_ahead_pool_->Stop();  // runs the commits ahead already queued
  StopUnlinksBehind();       // sends the unlinks behind already queued
  FlushAll().IgnoreError();
  if (subscriber_) subscriber_->Stop();
  upload_pool_->Stop();
  prefetch_pool_->Stop();
  file_ctx_.closed_unsynced.StopWriteback();  // syncs what closed files left unsynced
  session_.Stop();
}

absl::Status Filesystem::CheckWritable() const {
  if (opts_.read_only) return PosixError(EROFS, "mounted read-only");
  return absl::OkStatus();
}

Attr Filesystem::Overlay(Attr a) {
  if (auto f = inodes_.File(a.ino())) f->OverlayAttr(&a);
  return a;
}

void Filesystem::Remember(const Attr& a) { cache_.PutAttr(a); }

void Filesystem::DirChanged(uint64_t dir, const Attr& after) {
  cache_.DropAttr(dir);
  if (after.ino() == dir) Remember(after);
}

void Filesystem::ListingAdded(uint64_t dir, const Attr& dir_after, std::string_view name, uint64_t ino) {
  if (dir_after.ino() != dir) return listings_.Forget(dir);
  listings_.Added(dir, dir_after.version(), name, ino);
}

void Filesystem::ListingRemoved(uint64_t dir, const Attr& dir_after, std::string_view name) {
  if (dir_after.ino() != dir) return listings_.Forget(dir);
  listings_.Removed(dir, dir_after.version(), name);
}

void Filesystem::ListingRenamed(uint64_t parent, uint64_t parent_version, std::string_view name,
                                uint64_t new_parent, uint64_t new_parent_version, std::string_view new_name,
                                uint64_t ino, bool exchange) {
  if (exchange) {  // rare: forget both rather than reason about half-known swaps
    listings_.Forget(parent);
    listings_.Forget(new_parent);
    return;
  }
  std::string from(name), to(new_name);
  if (parent == new_parent) {
    listings_.Apply(parent, parent_version, [&](auto& names) {
      names.erase(from);
      names[to] = ino;
    });
    return;
  }
  listings_.Removed(parent, parent_version, name);
  listings_.Added(new_parent, new_parent_version, new_name, ino);
}

void Filesystem::OnWritePressure() {
  // One writer at a time pushes the files with the most dirty bytes to the uploaders.
  if (pressure_running_.exchange(true)) return;
  auto files = inodes_.OpenFiles();
  std::sort(files.begin(), files.end(),
            [](const auto& a, const auto& b) { return a->dirty_bytes() > b->dirty_bytes(); });
  uint64_t target = budget_.capacity() / 4, pushed = 0;
  for (const auto& f : files) {
    uint64_t d = f->dirty_bytes();
    if (d == 0) break;
    f->UploadDirty();
    pushed += d;
    if (pushed >= target) break;
  }
  pressure_running_ = false;
}

std::shared_ptr<Filesystem::FileHandle> Filesystem::Handle(uint64_t fh) {
  MutexLock lock(handles_mu_);
  auto it = handles_.find(fh);
  return it == handles_.end() ? nullptr : it->second;
}

uint64_t Filesystem::AddHandle(std::shared_ptr<FileHandle> h) {
  MutexLock lock(handles_mu_);
  uint64_t id = next_handle_++;
  handles_.emplace(id, std::move(h));
  return id;
}

// ---- Events ----

void Filesystem::OnEvent(const filer::Event& ev, KernelNotifier* n) {
  // Only other clients' changes come here: the subscription leaves out this mount's own
  // (skip_own), whose replies already said what they did, and the kernel made them itself.
  auto inval_entry = [&](uint64_t parent, const std::string& name) {
    cache_.DropEntry(parent, name);
    if (n) n->InvalidateEntry(parent, name);
  };
  auto inval_attr = [&](uint64_t ino, bool data) {
    if (ino == 0) return;
    auto f = inodes_.File(ino);
    bool own = false;
    if (ev.has_attr() && ev.attr().ino() == ino) {
      auto cached = cache_.GetAttr(ino);
      own = cached && cached->version() >= ev.attr().version();
      if (data && f && f->IsOwnVersion(ev.attr().version())) own = true;
    }
    if (own) return;  // this mount already saw that version
    cache_.DropAttr(ino);
    if (data && f) f->MarkStale();
    if (n) n->InvalidateInode(ino, data);
  };
  // An entry change implies its directories' times (and nlink) changed.
  const bool is_dir = ev.has_attr() && S_ISDIR(ev.attr().mode());
  switch (ev.kind()) {
    case filer::EVENT_CREATE:
      listings_.Added(ev.parent(), ev.parent_version(), ev.name(), ev.ino());
      inval_entry(ev.parent(), ev.name());
      inval_attr(ev.parent(), false);
      break;
    case filer::EVENT_DELETE:
      listings_.Removed(ev.parent(), ev.parent_version(), ev.name());
      if (is_dir) listings_.Forget(ev.ino());
      inval_entry(ev.parent(), ev.name());
      inval_attr(ev.parent(), false);
      inval_attr(ev.ino(), false);
      break;
    case filer::EVENT_RENAME: {
      ListingRenamed(ev.parent(), ev.parent_version(), ev.name(), ev.new_parent(), ev.new_parent_version(),
                     ev.new_name(), ev.ino(), ev.exchange());
      if (is_dir) listings_.Touched(ev.ino(), ev.attr().version());  // its ".." changed
      inval_entry(ev.parent(), ev.name());
      inval_entry(ev.new_parent(), ev.new_name());
      inval_attr(ev.parent(), false);
      if (ev.new_parent() != ev.parent()) inval_attr(ev.new_parent(), false);
      break;
    }
    case filer::EVENT_ATTR:
      if (is_dir) listings_.Touched(ev.ino(), ev.attr().version());
      inval_attr(ev.ino(), false);
      break;
    case filer::EVENT_DATA:
      inval_attr(ev.ino(), true);
      break;
    case filer::EVENT_XATTR:
      if (is_dir) listings_.Touched(ev.ino(), ev.attr().version());
      cache_.DropXattrs(ev.ino());
      break;
    default:
      break;
  }
}

void Filesystem::OnReset(KernelNotifier* n) {
  cache_.Clear();
  listings_.Clear();
  for (uint64_t ino : inodes_.KnownInodes()) {
    if (auto f = inodes_.File(ino); f && !f->HasLocalChanges()) f->MarkStale();
    if (n) n->InvalidateInode(ino, true);
  }
}

}  // namespace kelp::mount
