#include "filer/store/zeroed_wal.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <string>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "filer/store/kv_store.h"
#include "shared/metrics.h"
#include "shared/mutex.h"

namespace kelp::filer {
namespace {

using rocksdb::IODebugContext;
using rocksdb::IOOptions;
using rocksdb::IOStatus;

// Zeros are written in pieces of this size, each under the file's lock, so the writer waits
// for at most one piece.
constexpr uint64_t kPiece = 256 << 10;

IOStatus IOErrorOf(std::string_view what, const std::string& path, int err) {
  std::string msg = std::string(what) + " " + path + ": " + std::strerror(err);
  if (err == ENOSPC) return IOStatus::NoSpace(msg);
  return IOStatus::IOError(msg);
}

// pwrite of all of [data, data + n) at off; the errno on failure, 0 on success.
int PwriteAll(int fd, const char* data, size_t n, uint64_t off) {
  while (n > 0) {
    ssize_t w = ::pwrite(fd, data, n, static_cast<off_t>(off));
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    data += w;
    n -= static_cast<size_t>(w);
    off += static_cast<uint64_t>(w);
  }
  return 0;
}

// One open WAL, shared by the RocksDB file object and the zeroing thread (which may still
// hold it for its sync after RocksDB closed the file).
struct WalState {
  WalState(int fd_in, std::string path_in) : fd(fd_in), path(std::move(path_in)) {}
  ~WalState() { ::close(fd); }

  const int fd;
  const std::string path;
  Mutex mu;
  // Bytes RocksDB has written: [0, size).
  uint64_t size ABSL_GUARDED_BY(mu) = 0;
  // Bytes that exist in the file: [0, zeroed), zeros past size.
  uint64_t zeroed ABSL_GUARDED_BY(mu) = 0;
  bool closed ABSL_GUARDED_BY(mu) = false;
  // Handed to the zeroing thread and not yet done.
  bool queued ABSL_GUARDED_BY(mu) = false;
  // Zeros were written that no sync has covered yet.
  bool zeros_unsynced ABSL_GUARDED_BY(mu) = false;
};

// Whether the writer is within half of `ahead` of the zeroed region's end.
bool NeedsZeros(const WalState& w, uint64_t ahead) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w.mu) {
  return !w.closed && w.zeroed < w.size + ahead / 2;
}

// Once the writer is within half of `ahead` of the zeroed region's end, writes zeros from
// there to `ahead` past the writer, a piece at a time (so the file grows in steps of at least
// half of `ahead`). Returns false on an error (a full disk), after which the writer appends
// until a later write queues the file again.
bool ZeroAhead(WalState& w, uint64_t ahead) {
  static const std::string zeros(kPiece, '\0');
  uint64_t target = 0;
  {
    MutexLock l(w.mu);
    if (!NeedsZeros(w, ahead)) return true;
    target = w.size + ahead;
  }
  for (;;) {
    MutexLock l(w.mu);
    uint64_t from = std::max(w.zeroed, w.size);
    if (w.closed || from >= target) return true;
    uint64_t n = std::min<uint64_t>(kPiece, target - from);
    if (PwriteAll(w.fd, zeros.data(), n, from) != 0) return false;
    w.zeroed = from + n;
    w.zeros_unsynced = true;
  }
}

// The background thread that keeps every WAL's zeroed region ahead of its writer.
class Zeroer {
 public:
  explicit Zeroer(uint64_t ahead) : ahead_(ahead), thread_([this] { Run(); }) {}
  ~Zeroer() {
    {
      MutexLock l(mu_);
      stop_ = true;
    }
    cv_.NotifyAll();
    thread_.join();
  }

  void Enqueue(std::shared_ptr<WalState> w) {
    {
      MutexLock l(mu_);
      queue_.push_back(std::move(w));
    }
    cv_.NotifyOne();
  }

  uint64_t ahead() const { return ahead_; }

 private:
  void Run() {
    pthread_setname_np(pthread_self(), "filer-walzero");
    for (;;) {
      std::shared_ptr<WalState> w;
      {
        MutexLock l(mu_);
        while (queue_.empty() && !stop_) cv_.Wait(l);
        if (queue_.empty()) return;
        w = std::move(queue_.front());
        queue_.pop_front();
      }
      for (;;) {
        bool ok = ZeroAhead(*w, ahead_);
        bool sync = false;
        {
          MutexLock l(w->mu);
          sync = std::exchange(w->zeros_unsynced, false);
        }
        // The sync makes the new blocks and the file's new size durable here, so the
        // writer's own syncs find nothing but its data to flush.
        if (sync) ::fdatasync(w->fd);
        // The writer does not queue the file again while it is queued, so look once more.
        MutexLock l(w->mu);
        if (!ok || !NeedsZeros(*w, ahead_)) {
          w->queued = false;
          break;
        }
      }
    }
  }

  const uint64_t ahead_;
  Mutex mu_;
  CondVar cv_;
  std::deque<std::shared_ptr<WalState>> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

class ZeroedWalFile : public rocksdb::FSWritableFile {
 public:
  ZeroedWalFile(std::shared_ptr<WalState> w, std::shared_ptr<Zeroer> zeroer, Counter* growing)
      : w_(std::move(w)), zeroer_(std::move(zeroer)), growing_(growing) {}
  ~ZeroedWalFile() override { Close(IOOptions(), nullptr).PermitUncheckedError(); }

  IOStatus Append(const rocksdb::Slice& data, const IOOptions&, IODebugContext*) override {
    bool enqueue = false;
    uint64_t at;
    {
      MutexLock l(w_->mu);
      if (w_->closed) return IOStatus::IOError("append to closed WAL " + w_->path);
      at = w_->size;
      if (int err = PwriteAll(w_->fd, data.data(), data.size(), at))
        return IOErrorOf("write", w_->path, err);
      w_->size += data.size();
      if (w_->size > w_->zeroed) {
        growing_->Inc();
        w_->zeroed = w_->size;
      }
      if (NeedsZeros(*w_, zeroer_->ahead()) && !w_->queued) {
        w_->queued = true;
        enqueue = true;
      }
    }
    if (enqueue) zeroer_->Enqueue(w_);
    // A sync follows (SyncFollows): the device writes these pages while RocksDB inserts into
    // its memtable and the caller comes to the sync, which then waits for less, or only
    // flushes (4 KiB writes with an fsync after each, through a mount: fsync p50 498-610 us
    // before, 428-444 after). Starts I/O only; an error is the sync's to report.
    if (SyncFollows::active()) {
      (void)sync_file_range(w_->fd, static_cast<off_t>(at), static_cast<off_t>(data.size()),
                            SYNC_FILE_RANGE_WRITE);
    }
    return IOStatus::OK();
  }
  IOStatus Append(const rocksdb::Slice& data, const IOOptions& o, const rocksdb::DataVerificationInfo&,
                  IODebugContext* dbg) override {
    return Append(data, o, dbg);
  }

  // Cuts the zeros past RocksDB's bytes, so a closed WAL is exactly what was written.
  IOStatus Close(const IOOptions&, IODebugContext*) override {
    MutexLock l(w_->mu);
    if (w_->closed) return IOStatus::OK();
    w_->closed = true;
    if (w_->zeroed > w_->size && ::ftruncate(w_->fd, static_cast<off_t>(w_->size)) != 0) {
      return IOErrorOf("truncate", w_->path, errno);
    }
    w_->zeroed = w_->size;
    return IOStatus::OK();
  }
  IOStatus Truncate(uint64_t size, const IOOptions&, IODebugContext*) override {
    MutexLock l(w_->mu);
    if (::ftruncate(w_->fd, static_cast<off_t>(size)) != 0) return IOErrorOf("truncate", w_->path, errno);
    w_->size = size;
    w_->zeroed = size;
    return IOStatus::OK();
  }
  // Writes go straight to the OS; RocksDB's WritableFileWriter does the buffering.
  IOStatus Flush(const IOOptions&, IODebugContext*) override { return IOStatus::OK(); }
  IOStatus Sync(const IOOptions&, IODebugContext*) override {
    if (::fdatasync(w_->fd) != 0) return IOErrorOf("fdatasync", w_->path, errno);
    return IOStatus::OK();
  }
  IOStatus Fsync(const IOOptions&, IODebugContext*) override {
    if (::fsync(w_->fd) != 0) return IOErrorOf("fsync", w_->path, errno);
    return IOStatus::OK();
  }
  bool IsSyncThreadSafe() const override { return true; }
  uint64_t GetFileSize(const IOOptions&, IODebugContext*) override {
    MutexLock l(w_->mu);
    return w_->size;
  }

 private:
  std::shared_ptr<WalState> w_;
  std::shared_ptr<Zeroer> zeroer_;
  Counter* const growing_;
};

class ZeroedWalFileSystem : public rocksdb::FileSystemWrapper {
 public:
  ZeroedWalFileSystem(std::shared_ptr<rocksdb::FileSystem> base, const ZeroedWalOptions& o)
      : rocksdb::FileSystemWrapper(std::move(base)),
        zeroer_(std::make_shared<Zeroer>(o.ahead_bytes)),
        growing_(MetricsRegistry::Default().GetCounter(
            "kelp_filer_wal_growing_writes_total",
            "WAL writes past the region zeroed ahead of them (their sync also writes the block allocation and the new size)")) {}

  static const char* kClassName() { return "KelpZeroedWalFileSystem"; }
  const char* Name() const override { return kClassName(); }

  IOStatus NewWritableFile(const std::string& fname, const rocksdb::FileOptions& fo,
                           std::unique_ptr<rocksdb::FSWritableFile>* result, IODebugContext* dbg) override {
    if (!IsRocksWalName(fname) || fo.use_direct_writes || fo.use_mmap_writes) {
      return target()->NewWritableFile(fname, fo, result, dbg);
    }
    int fd = ::open(fname.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return IOErrorOf("open", fname, errno);
    auto w = std::make_shared<WalState>(fd, fname);
    // The first region is zeroed here, so the WAL's first writes already land inside the
    // file; the zeroing thread syncs it. (On a full disk the writes append.)
    (void)ZeroAhead(*w, zeroer_->ahead());
    {
      MutexLock l(w->mu);
      w->queued = true;
    }
    zeroer_->Enqueue(w);
    *result = std::make_unique<ZeroedWalFile>(std::move(w), zeroer_, growing_);
    return IOStatus::OK();
  }

 private:
  std::shared_ptr<Zeroer> zeroer_;
  Counter* const growing_;
};

}  // namespace

bool IsRocksWalName(std::string_view name) {
  size_t slash = name.rfind('/');
  if (slash != std::string_view::npos) name.remove_prefix(slash + 1);
  if (name.size() <= 4 || name.substr(name.size() - 4) != ".log") return false;
  for (char c : name.substr(0, name.size() - 4)) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

std::shared_ptr<rocksdb::FileSystem> NewZeroedWalFileSystem(std::shared_ptr<rocksdb::FileSystem> base,
                                                            const ZeroedWalOptions& options) {
  return std::make_shared<ZeroedWalFileSystem>(std::move(base), options);
}

}  // namespace kelp::filer
