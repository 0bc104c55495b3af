#include "volume/client/local_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/match.h"
#include "shared/coding.h"
#include "shared/file_id.h"
#include "shared/hash.h"
#include "shared/status.h"
#include "shared/strings.h"
#include "volume/client/volume_client.h"
#include "volume/store/needle.h"

namespace kelp::volume {

absl::StatusOr<NeedleLocation> ParseNeedleLocation(const http::Headers& headers) {
  NeedleLocation loc;
  loc.dat_path = std::string(headers.Get(kDatPathHeader));
  // Only a volume's own file: an absolute path to a .dat, so that a confused answer cannot
  // point the reader anywhere else (and what is read must still pass the needle's checks).
  if (loc.dat_path.empty() || loc.dat_path.front() != '/' ||
      !absl::EndsWith(loc.dat_path, ".dat")) {
    return absl::InvalidArgumentError(
        kelp::StrCat("bad ", kDatPathHeader, " \"", loc.dat_path, "\""));
  }
  if (!kelp::ParseInt(headers.Get(kNeedleOffsetHeader), &loc.offset) ||
      loc.offset % format::kAlignment != 0) {
    return absl::InvalidArgumentError(kelp::StrCat("bad ", kNeedleOffsetHeader));
  }
  if (!kelp::ParseInt(headers.Get(kNeedleSizeHeader), &loc.size) ||
      loc.size > format::kMaxDataSize) {
    return absl::InvalidArgumentError(kelp::StrCat("bad ", kNeedleSizeHeader));
  }
  return loc;
}

struct LocalReader::Dat {
  explicit Dat(int fd) : fd(fd) {}
  ~Dat() {
    close(fd);
    if (direct_fd >= 0) close(direct_fd);
  }
  const int fd;
  int direct_fd = -1;  // the same file with O_DIRECT; -1 where the file system has none
  dev_t dev = 0;
  ino_t ino = 0;
};

namespace {

// O_DIRECT reads start, end and land at multiples of this (every block size up to a page).
constexpr uint64_t kDirectAlign = 4096;

// A page-aligned buffer per thread for direct reads, kept for the thread's next read (a fresh
// one would fault in its pages every time).
struct DirectBuffer {
  char* data = nullptr;
  size_t size = 0;
  ~DirectBuffer() { std::free(data); }
  char* Reserve(size_t n) {
    if (n > size) {
      std::free(data);
      size = (n + kDirectAlign - 1) / kDirectAlign * kDirectAlign;
      data = static_cast<char*>(std::aligned_alloc(kDirectAlign, size));
      if (data == nullptr) size = 0;
    }
    return data;
  }
};

ssize_t PreadvFully(int fd, const iovec* iov, int parts, uint64_t offset) {
  ssize_t got;
  do {
    got = preadv(fd, iov, parts, static_cast<off_t>(offset));
  } while (got < 0 && errno == EINTR);
  return got;
}

}  // namespace

LocalReader::LocalReader(VolumeClient* client) : client_(client) {}
LocalReader::~LocalReader() = default;

absl::StatusOr<std::shared_ptr<LocalReader::Dat>> LocalReader::Open(const std::string& path) {
  // The file kept open is used while it is still the one at the path: once a vacuum renamed a
  // new one over it, an offset the server gives now is in the new one, and the old one may hold
  // an older needle of the same fid there (a fid written twice).
  struct stat now;
  if (stat(path.c_str(), &now) != 0) {
    return absl::PermissionDeniedError(kelp::StrCat("stat ", path, ": ", std::strerror(errno)));
  }
  {
    MutexLock lock(mu_);
    auto it = files_.find(path);
    if (it != files_.end() && it->second->dev == now.st_dev && it->second->ino == now.st_ino)
      return it->second;
  }
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return absl::PermissionDeniedError(kelp::StrCat("open ", path, ": ", std::strerror(errno)));
  auto dat = std::make_shared<Dat>(fd);
  dat->direct_fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
  struct stat opened;
  if (fstat(fd, &opened) != 0) return ErrnoStatus(kelp::StrCat("fstat ", path));
  dat->dev = opened.st_dev;
  dat->ino = opened.st_ino;
  MutexLock lock(mu_);
  files_[path] = dat;  // an older one closes once its last reader is done with it
  return dat;
}

absl::Status LocalReader::ReadNeedle(std::string_view url, std::string_view fid, char* dst,
                                     size_t len, bool header_only) {
  ASSIGN_OR_RETURN(FileId id, FileId::Parse(fid));
  for (int attempt = 0;; ++attempt) {
    ASSIGN_OR_RETURN(NeedleLocation loc, client_->Locate(url, fid));
    if (!header_only && loc.size != len) {
      return absl::FailedPreconditionError(
          kelp::StrCat("blob ", fid, " is ", loc.size, " bytes, not ", len));
    }
    ASSIGN_OR_RETURN(std::shared_ptr<Dat> dat, Open(loc.dat_path));
    char head_buf[format::kHeaderSize];
    char foot_buf[format::kFooterSize];
    const char* head = head_buf;
    const char* data = dst;
    const char* foot = foot_buf;
    bool whole = false;  // header, data and footer all read
    if (header_only) {
      iovec iov{head_buf, sizeof head_buf};
      ssize_t got = PreadvFully(dat->fd, &iov, 1, loc.offset);
      if (got < 0) return ErrnoStatus(kelp::StrCat("read ", loc.dat_path));
      whole = static_cast<size_t>(got) == sizeof head_buf;
    } else if (char* buf = nullptr; dat->direct_fd >= 0 && len >= kDirectMin &&
                                    (buf = DirectRead(*dat, loc.offset, len)) != nullptr) {
      head = buf + (loc.offset % kDirectAlign);
      data = head + format::kHeaderSize;
      foot = data + len;
      whole = true;
    } else {
      iovec iov[3] = {{head_buf, sizeof head_buf}, {dst, len}, {foot_buf, sizeof foot_buf}};
      ssize_t got = PreadvFully(dat->fd, iov, 3, loc.offset);
      if (got < 0) return ErrnoStatus(kelp::StrCat("read ", loc.dat_path));
      whole = static_cast<size_t>(got) == sizeof head_buf + len + sizeof foot_buf;
    }
    if (whole) {
      NeedleHeader h = DecodeHeader(head);
      if (h.key == id.key && h.cookie == id.cookie && h.size == loc.size) {
        if (header_only) return absl::OkStatus();
        if (Hash64(data, len) != DecodeFixed64LE(foot)) {
          return absl::DataLossError(
              kelp::StrCat("blob ", fid, " in ", loc.dat_path, " fails its checksum"));
        }
        if (data != dst) std::memcpy(dst, data, len);
        return absl::OkStatus();
      }
    }
    // Not this needle (or the file ends first): a vacuum renamed a new file over the path
    // between the server's answer and our open. Once more, with a fresh answer.
    if (attempt > 0) {
      return absl::AbortedError(
          kelp::StrCat("blob ", fid, " is not at ", loc.offset, " in ", loc.dat_path));
    }
  }
}

char* LocalReader::DirectRead(const Dat& dat, uint64_t offset, size_t len) {
  thread_local DirectBuffer buffer;
  const uint64_t begin = offset / kDirectAlign * kDirectAlign;
  const uint64_t needed = offset + format::kHeaderSize + len + format::kFooterSize;
  const uint64_t end = (needed + kDirectAlign - 1) / kDirectAlign * kDirectAlign;
  char* buf = buffer.Reserve(end - begin);
  if (buf == nullptr) return nullptr;
  iovec iov{buf, end - begin};
  ssize_t got = PreadvFully(dat.direct_fd, &iov, 1, begin);
  // Short at the end of the file is fine (end is rounded up past it); an error is left to the
  // buffered read.
  if (got < 0 || begin + static_cast<uint64_t>(got) < needed) return nullptr;
  return buf;
}

absl::Status LocalReader::Read(std::string_view url, std::string_view fid, char* dst, size_t len) {
  return ReadNeedle(url, fid, dst, len, false);
}

absl::Status LocalReader::Probe(std::string_view url, std::string_view fid) {
  return ReadNeedle(url, fid, nullptr, 0, true);
}

}  // namespace kelp::volume
