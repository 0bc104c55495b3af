#include "volume/store/env.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::volume {
namespace {

class PosixFile : public File {
 public:
  PosixFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~PosixFile() override { close(fd_); }

  absl::StatusOr<size_t> ReadAt(uint64_t offset, size_t n, char* buf) const override {
    size_t got = 0;
    while (got < n) {
      ssize_t r = pread(fd_, buf + got, n - got, static_cast<off_t>(offset + got));
      if (r < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus(kelp::StrCat("pread ", path_));
      }
      if (r == 0) break;
      got += r;
    }
    return got;
  }

  absl::StatusOr<size_t> WriteAt(uint64_t offset, std::string_view data) override {
    for (;;) {
      ssize_t r = pwrite(fd_, data.data(), data.size(), static_cast<off_t>(offset));
      if (r >= 0) return static_cast<size_t>(r);
      if (errno != EINTR) return ErrnoStatus(kelp::StrCat("pwrite ", path_));
    }
  }

  absl::Status Truncate(uint64_t size) override {
    if (ftruncate(fd_, static_cast<off_t>(size)) != 0)
      return ErrnoStatus(kelp::StrCat("ftruncate ", path_));
    return absl::OkStatus();
  }

  absl::Status DataSync() override {
    if (int err = writeback_error_.load(); err != 0) {
      return PosixError(err, kelp::StrCat("writeback of ", path_, ": ", strerror(err)));
    }
    if (fdatasync(fd_) != 0) return ErrnoStatus(kelp::StrCat("fdatasync ", path_));
    return absl::OkStatus();
  }

  void StartWriteback(uint64_t offset, uint64_t len) override {
    // Starts I/O only: a failure of it is the kernel's to report at the wait or the sync.
    (void)sync_file_range(fd_, static_cast<off_t>(offset), static_cast<off_t>(len),
                          SYNC_FILE_RANGE_WRITE);
  }

  void DropCached(uint64_t offset, uint64_t len) override {
    // Waiting reports a write error once, to this call: keep it for every later DataSync, so
    // that no sync after it claims the lost bytes are on the device.
    if (sync_file_range(fd_, static_cast<off_t>(offset), static_cast<off_t>(len),
                        SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                            SYNC_FILE_RANGE_WAIT_AFTER) != 0) {
      int err = errno;
      if (err != EINTR) {
        int none = 0;
        writeback_error_.compare_exchange_strong(none, err);
      }
      return;
    }
    (void)posix_fadvise(fd_, static_cast<off_t>(offset), static_cast<off_t>(len),
                        POSIX_FADV_DONTNEED);
  }

  absl::StatusOr<uint64_t> Size() const override {
    struct stat st;
    if (fstat(fd_, &st) != 0) return ErrnoStatus(kelp::StrCat("fstat ", path_));
    return static_cast<uint64_t>(st.st_size);
  }

 private:
  const int fd_;
  const std::string path_;
  std::atomic<int> writeback_error_{0};  // errno of a failed DropCached wait, for DataSync
};

class PosixEnv : public Env {
 public:
  absl::StatusOr<std::shared_ptr<File>> Open(const std::string& path, bool create) override {
    int fd = open(path.c_str(), O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0644);
    if (fd < 0) return ErrnoStatus(kelp::StrCat("open ", path));
    return std::shared_ptr<File>(std::make_shared<PosixFile>(fd, path));
  }

  bool Exists(const std::string& path) override { return access(path.c_str(), F_OK) == 0; }
  bool real_files() const override { return true; }

  absl::Status Rename(const std::string& from, const std::string& to) override {
    if (rename(from.c_str(), to.c_str()) != 0)
      return ErrnoStatus(kelp::StrCat("rename ", from, " to ", to));
    return absl::OkStatus();
  }

  absl::Status Remove(const std::string& path) override {
    if (unlink(path.c_str()) != 0 && errno != ENOENT)
      return ErrnoStatus(kelp::StrCat("unlink ", path));
    return absl::OkStatus();
  }

  absl::Status CreateDir(const std::string& dir) override {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return PosixError(ec.value(), kelp::StrCat("mkdir ", dir, ": ", ec.message()));
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir) override {
    DIR* d = opendir(dir.c_str());
    if (d == nullptr) return ErrnoStatus(kelp::StrCat("opendir ", dir));
    std::vector<std::string> names;
    while (dirent* e = readdir(d)) {
      std::string_view n = e->d_name;
      if (n != "." && n != "..") names.emplace_back(n);
    }
    closedir(d);
    return names;
  }

  absl::Status SyncDir(const std::string& dir) override {
    int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus(kelp::StrCat("open ", dir));
    int rc = fsync(fd);
    absl::Status s = rc == 0 ? absl::OkStatus() : ErrnoStatus(kelp::StrCat("fsync ", dir));
    close(fd);
    return s;
  }

  absl::StatusOr<DiskUsage> GetDiskUsage(const std::string& dir) override {
    struct statvfs st;
    if (statvfs(dir.c_str(), &st) != 0) return ErrnoStatus(kelp::StrCat("statvfs ", dir));
    return DiskUsage{static_cast<uint64_t>(st.f_blocks) * st.f_frsize,
                     static_cast<uint64_t>(st.f_bavail) * st.f_frsize};
  }
};

}  // namespace

Env* Env::Default() {
  static Env* env = new PosixEnv;
  return env;
}

absl::Status WriteFully(File& file, uint64_t offset, std::string_view data) {
  while (!data.empty()) {
    ASSIGN_OR_RETURN(size_t n, file.WriteAt(offset, data));
    if (n == 0) return PosixError(EIO, "write made no progress");
    offset += n;
    data.remove_prefix(n);
  }
  return absl::OkStatus();
}

absl::Status ReadFully(const File& file, uint64_t offset, size_t n, char* buf) {
  ASSIGN_OR_RETURN(size_t got, file.ReadAt(offset, n, buf));
  if (got != n) {
    return absl::DataLossError(
        kelp::StrCat("short read: ", got, " of ", n, " bytes at offset ", offset));
  }
  return absl::OkStatus();
}

}  // namespace kelp::volume
