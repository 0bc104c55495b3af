#include "volume/client/local_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
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
  ~Dat() { close(fd); }
  const int fd;
  dev_t dev = 0;
  ino_t ino = 0;
};

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
    char head[format::kHeaderSize];
    char foot[format::kFooterSize];
    iovec iov[3] = {{head, sizeof head}, {dst, len}, {foot, sizeof foot}};
    const int parts = header_only ? 1 : 3;
    const size_t want = header_only ? sizeof head : sizeof head + len + sizeof foot;
    ssize_t got;
    do {
      got = preadv(dat->fd, iov, parts, static_cast<off_t>(loc.offset));
    } while (got < 0 && errno == EINTR);
    if (got < 0) return ErrnoStatus(kelp::StrCat("read ", loc.dat_path));
    if (static_cast<size_t>(got) == want) {
      NeedleHeader h = DecodeHeader(head);
      if (h.key == id.key && h.cookie == id.cookie && h.size == loc.size) {
        if (header_only) return absl::OkStatus();
        if (Hash64(dst, len) != DecodeFixed64LE(foot)) {
          return absl::DataLossError(
              kelp::StrCat("blob ", fid, " in ", loc.dat_path, " fails its checksum"));
        }
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

absl::Status LocalReader::Read(std::string_view url, std::string_view fid, char* dst, size_t len) {
  return ReadNeedle(url, fid, dst, len, false);
}

absl::Status LocalReader::Probe(std::string_view url, std::string_view fid) {
  return ReadNeedle(url, fid, nullptr, 0, true);
}

}  // namespace kelp::volume
