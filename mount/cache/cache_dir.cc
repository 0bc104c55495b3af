#include "mount/cache/cache_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>

#include "absl/container/flat_hash_map.h"
#include "mount/cache/cache_format.h"
#include "shared/coding.h"
#include "shared/hash.h"
#include "shared/log.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::mount::cache {
namespace {

namespace f = format;

// Index files larger than this are not believed (a 1000 MiB cache of 4 KiB blobs is ~15 MiB).
constexpr uint64_t kMaxIndexBytes = 1ull << 30;

std::string VersionText(const TierLayout& l) {
  return kelp::StrCat(f::kVersionMagic, " ", f::kFormatVersion, "\npage_size ", f::kPageSize,
                      "\nsmall_max ", l.small_max, "\nmedium_max ", l.medium_max, "\nmedium_block ",
                      l.medium_block, "\nlarge_block ", l.large_block, "\n");
}

uint64_t StatBytesAt(int dirfd, const char* name) {
  struct stat st;
  if (::fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return 0;
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

bool ExistsAt(int dirfd, const char* name) {
  struct stat st;
  return ::fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

// Reads a whole small file; NotFound if absent.
absl::StatusOr<std::string> ReadFileAt(int dirfd, const char* name, uint64_t limit) {
  int fd = ::openat(dirfd, name, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(kelp::StrCat("cache: open ", name));
  std::string out;
  char buf[1 << 16];
  absl::Status status;
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      status = ErrnoStatus(kelp::StrCat("cache: read ", name));
      break;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > limit) {
      status = absl::DataLossError(kelp::StrCat("cache: ", name, " is too large"));
      break;
    }
  }
  ::close(fd);
  if (!status.ok()) return status;
  return out;
}

absl::Status WriteFileAt(int dirfd, const char* name, std::string_view data) {
  int fd = ::openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus(kelp::StrCat("cache: create ", name));
  absl::Status status;
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      status = ErrnoStatus(kelp::StrCat("cache: write ", name));
      break;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  if (::close(fd) != 0 && status.ok()) status = ErrnoStatus(kelp::StrCat("cache: close ", name));
  if (!status.ok()) ::unlinkat(dirfd, name, 0);
  return status;
}

absl::Status UnlinkIfPresent(int dirfd, const char* name) {
  if (::unlinkat(dirfd, name, 0) == 0 || errno == ENOENT) return absl::OkStatus();
  return ErrnoStatus(kelp::StrCat("cache: remove ", name));
}

struct IndexHint {
  EntryMeta meta;
  uint8_t state;
  size_t position;
};

// Parses the index; an error means "no hint", never a broken cache.
absl::Status ParseIndex(std::string_view data, absl::flat_hash_map<uint64_t, IndexHint>* out,
                        uint64_t* next_id) {
  if (data.size() < f::kIndexHeaderLen + f::kIndexTrailerLen ||
      data.substr(0, sizeof f::kIndexMagic) !=
          std::string_view(f::kIndexMagic, sizeof f::kIndexMagic)) {
    return absl::DataLossError("bad index magic");
  }
  size_t body = data.size() - f::kIndexTrailerLen;
  if (Hash64(data.data(), body) != DecodeFixed64LE(data.data() + body)) {
    return absl::DataLossError("index checksum mismatch");
  }
  const char* p = data.data();
  if (DecodeFixed32LE(p + 8) != f::kFormatVersion) return absl::DataLossError("index version");
  uint64_t count = DecodeFixed64LE(p + 16);
  *next_id = DecodeFixed64LE(p + 24);
  size_t pos = f::kIndexHeaderLen;
  for (uint64_t i = 0; i < count; ++i) {
    if (pos + f::kIndexRecordFixedLen > body) return absl::DataLossError("index truncated");
    const char* r = p + pos;
    IndexHint h;
    h.meta.id = DecodeFixed64LE(r);
    h.meta.blob_size = DecodeFixed64LE(r + 8);
    h.meta.block_offset = DecodeFixed64LE(r + 16);
    h.meta.data_len = DecodeFixed32LE(r + 24);
    uint8_t tier = static_cast<uint8_t>(r[28]);
    h.state = static_cast<uint8_t>(r[29]);
    size_t fid_len = DecodeFixed16LE(r + 30);
    uint64_t pages = PageCount(h.meta.data_len);
    if (tier >= kNumTiers || fid_len == 0 || fid_len > f::kMaxFidLen ||
        pos + f::kIndexRecordFixedLen + fid_len + 8 * pages > body) {
      return absl::DataLossError("bad index record");
    }
    h.meta.tier = static_cast<Tier>(tier);
    h.meta.fid.assign(r + f::kIndexRecordFixedLen, fid_len);
    const char* sums = r + f::kIndexRecordFixedLen + fid_len;
    h.meta.page_sums.resize(pages);
    for (uint64_t p = 0; p < pages; ++p) h.meta.page_sums[p] = DecodeFixed64LE(sums + 8 * p);
    h.position = static_cast<size_t>(i);
    pos += f::kIndexRecordFixedLen + fid_len + 8 * pages;
    out->insert_or_assign(h.meta.id, std::move(h));
  }
  if (pos != body) return absl::DataLossError("index has trailing bytes");
  return absl::OkStatus();
}

// Is meta a block the current layout would produce, stored in the right tier?
bool FitsLayout(const EntryMeta& m, const TierLayout& layout, Tier tier) {
  if (m.data_len == 0 || layout.TierOf(m.blob_size) != tier || m.block_offset >= m.blob_size) {
    return false;
  }
  uint64_t bs = layout.BlockSize(m.blob_size);
  return m.block_offset % bs == 0 && m.data_len == std::min(bs, m.blob_size - m.block_offset);
}

}  // namespace

absl::StatusOr<std::unique_ptr<CacheDir>> CacheDir::Open(const std::string& path,
                                                         const TierLayout& layout) {
  std::unique_ptr<CacheDir> dir(new CacheDir);
  dir->path_ = path;
  if (absl::Status s = dir->Init(layout); !s.ok()) return s;
  return dir;
}

CacheDir::~CacheDir() {
  for (int fd : tier_fds_) {
    if (fd >= 0) ::close(fd);
  }
  if (lock_fd_ >= 0) ::close(lock_fd_);
  if (root_fd_ >= 0) ::close(root_fd_);
}

absl::Status CacheDir::Init(const TierLayout& layout) {
  std::error_code ec;
  std::filesystem::create_directories(path_, ec);
  if (ec) return PosixError(ec.value(), kelp::StrCat("cache: create ", path_));
  root_fd_ = ::open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root_fd_ < 0) return ErrnoStatus(kelp::StrCat("cache: open ", path_));

  // Two mounts sharing a directory would each believe they own its capacity.
  // Read-only: flock() needs no more, and a directory that goes (or is) read-only can still
  // serve what it holds (inserts then fail and back off).
  lock_fd_ = ::openat(root_fd_, f::kLockFile, O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0) return ErrnoStatus(kelp::StrCat("cache: create ", path_, "/", f::kLockFile));
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      return absl::FailedPreconditionError(
          kelp::StrCat("cache: ", path_, " is in use by another process"));
    }
    return ErrnoStatus(kelp::StrCat("cache: lock ", path_));
  }

  std::string expected = VersionText(layout);
  for (int attempt = 0; attempt < 2; ++attempt) {
    absl::StatusOr<std::string> version = ReadFileAt(root_fd_, f::kVersionFile, 4096);
    if (version.ok() && *version == expected) {
      bool complete = true;
      for (int i = 0; i < kNumTiers; ++i) {
        tier_fds_[i] = ::openat(root_fd_, f::kTierDirs[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        complete = complete && tier_fds_[i] >= 0;
      }
      if (complete) {
        struct statvfs vfs;
        if (::fstatvfs(root_fd_, &vfs) == 0 && vfs.f_frsize >= 512) block_size_ = vfs.f_frsize;
        return absl::OkStatus();
      }
      for (int& fd : tier_fds_) {
        if (fd >= 0) ::close(fd);
        fd = -1;
      }
      RETURN_IF_ERROR(Wipe("a tier directory is missing or damaged"));
    } else if (version.ok()) {
      RETURN_IF_ERROR(Wipe("it is from another format version or tier layout"));
    } else if (!absl::IsNotFound(version.status())) {
      RETURN_IF_ERROR(
          Wipe(kelp::StrCat("its version file is unreadable: ", version.status().message())));
    } else {
      bool ours = ExistsAt(root_fd_, f::kIndexFile);
      for (const char* t : f::kTierDirs) ours = ours || ExistsAt(root_fd_, t);
      if (ours) RETURN_IF_ERROR(Wipe("its version file is missing"));
    }
    RETURN_IF_ERROR(CreateFresh(layout));
  }
  return absl::InternalError(kelp::StrCat("cache: ", path_, " does not stay valid after a wipe"));
}

absl::Status CacheDir::Wipe(std::string_view why) {
  spdlog::warn("cache: discarding the contents of {}: {}", path_, why);
  // The version file goes first: a wipe cut short leaves a directory that is wiped again.
  RETURN_IF_ERROR(UnlinkIfPresent(root_fd_, f::kVersionFile));
  RETURN_IF_ERROR(UnlinkIfPresent(root_fd_, f::kIndexFile));
  RETURN_IF_ERROR(UnlinkIfPresent(root_fd_, f::kIndexTmpFile));
  for (const char* t : f::kTierDirs) {
    std::error_code ec;
    std::filesystem::remove_all(std::filesystem::path(path_) / t, ec);
    if (ec) return PosixError(ec.value(), kelp::StrCat("cache: remove ", path_, "/", t));
  }
  return absl::OkStatus();
}

absl::Status CacheDir::CreateFresh(const TierLayout& layout) {
  for (const char* t : f::kTierDirs) {
    if (::mkdirat(root_fd_, t, 0755) != 0 && errno != EEXIST) {
      return ErrnoStatus(kelp::StrCat("cache: mkdir ", path_, "/", t));
    }
  }
  // Written last: its presence says the directory is complete.
  return WriteFileAt(root_fd_, f::kVersionFile, VersionText(layout));
}

ScanResult CacheDir::Scan(const TierLayout& layout) {
  ScanResult result;
  absl::flat_hash_map<uint64_t, IndexHint> hints;
  uint64_t max_id = 0;
  if (absl::StatusOr<std::string> data = ReadFileAt(root_fd_, f::kIndexFile, kMaxIndexBytes);
      data.ok()) {
    uint64_t next_id = 0;
    if (absl::Status s = ParseIndex(*data, &hints, &next_id); s.ok()) {
      result.index_valid = true;
      max_id = next_id > 0 ? next_id - 1 : 0;
    } else {
      spdlog::warn("cache: ignoring the index of {}: {}", path_, s.message());
      hints.clear();
      ::unlinkat(root_fd_, f::kIndexFile, 0);
    }
  }
  ::unlinkat(root_fd_, f::kIndexTmpFile, 0);  // a Close() cut short

  for (int t = 0; t < kNumTiers; ++t) {
    Tier tier = static_cast<Tier>(t);
    int fd = tier_fds_[t];
    int dup_fd = ::dup(fd);
    DIR* d = dup_fd >= 0 ? ::fdopendir(dup_fd) : nullptr;
    if (!d) {
      if (dup_fd >= 0) ::close(dup_fd);
      spdlog::warn("cache: cannot list {}/{}", path_, f::kTierDirs[t]);
      continue;
    }
    std::vector<std::pair<uint64_t, ScannedEntry>> found;  // (order key, entry)
    auto remove = [&](const char* name) {
      if (::unlinkat(fd, name, 0) != 0 && errno == EISDIR) {
        std::error_code ec;
        std::filesystem::remove_all(std::filesystem::path(path_) / f::kTierDirs[t] / name, ec);
      }
      ++result.dropped;
    };
    while (dirent* de = ::readdir(d)) {
      std::string_view name = de->d_name;
      if (name == "." || name == "..") continue;
      uint64_t id = 0;
      struct stat st;
      if (!ParseEntryFileName(name, &id) ||
          ::fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) {
        remove(de->d_name);
        continue;
      }
      max_id = std::max(max_id, id);
      ScannedEntry e;
      e.disk_bytes = static_cast<uint64_t>(st.st_blocks) * 512;
      uint64_t order = (1ull << 62) + id;  // entries the index does not know are the newest
      auto hint = hints.find(id);
      if (hint != hints.end() && hint->second.meta.tier == tier &&
          static_cast<uint64_t>(st.st_size) ==
              EntryFileSize(hint->second.meta.fid.size(), hint->second.meta.data_len)) {
        e.meta = std::move(hint->second.meta);
        e.policy_state = hint->second.state;
        order = hint->second.position;
        ++result.from_index;
      } else {
        absl::StatusOr<EntryMeta> meta =
            ReadEntryHeader(fd, id, tier, static_cast<uint64_t>(st.st_size));
        if (!meta.ok()) {
          remove(de->d_name);
          continue;
        }
        e.meta = std::move(*meta);
      }
      if (!FitsLayout(e.meta, layout, tier)) {
        remove(de->d_name);
        continue;
      }
      found.emplace_back(order, std::move(e));
    }
    ::closedir(d);
    std::sort(found.begin(), found.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& [order, e] : found) result.tiers[t].push_back(std::move(e));
  }
  result.next_id = max_id + 1;
  return result;
}

uint64_t CacheDir::MeasureRootMeta() const {
  struct stat st;
  uint64_t total = ::fstat(root_fd_, &st) == 0 ? static_cast<uint64_t>(st.st_blocks) * 512 : 0;
  for (const char* name : {f::kVersionFile, f::kLockFile}) total += StatBytesAt(root_fd_, name);
  return total + MeasureIndex();
}

uint64_t CacheDir::MeasureIndex() const {
  return StatBytesAt(root_fd_, f::kIndexFile) + StatBytesAt(root_fd_, f::kIndexTmpFile);
}

uint64_t CacheDir::MeasureTierDir(Tier tier) const {
  struct stat st;
  if (::fstat(tier_fd(tier), &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

std::string CacheDir::EncodeIndex(const std::vector<IndexRecord>& records, uint64_t next_id) {
  size_t size = f::kIndexHeaderLen + f::kIndexTrailerLen;
  for (const IndexRecord& r : records) {
    size += f::kIndexRecordFixedLen + r.entry.fid.size() + 8 * r.page_sums->size();
  }
  std::string out(size, '\0');
  char* p = out.data();
  std::memcpy(p, f::kIndexMagic, sizeof f::kIndexMagic);
  EncodeFixed32LE(p + 8, f::kFormatVersion);
  EncodeFixed64LE(p + 16, records.size());
  EncodeFixed64LE(p + 24, next_id);
  size_t pos = f::kIndexHeaderLen;
  for (const IndexRecord& r : records) {
    char* q = p + pos;
    EncodeFixed64LE(q, r.entry.id);
    EncodeFixed64LE(q + 8, r.entry.blob_size);
    EncodeFixed64LE(q + 16, r.entry.block_offset);
    EncodeFixed32LE(q + 24, r.entry.data_len);
    q[28] = static_cast<char>(r.entry.tier);
    q[29] = static_cast<char>(r.policy_state);
    EncodeFixed16LE(q + 30, static_cast<uint16_t>(r.entry.fid.size()));
    std::memcpy(q + f::kIndexRecordFixedLen, r.entry.fid.data(), r.entry.fid.size());
    char* sums = q + f::kIndexRecordFixedLen + r.entry.fid.size();
    for (size_t p = 0; p < r.page_sums->size(); ++p) EncodeFixed64LE(sums + 8 * p, (*r.page_sums)[p]);
    pos += f::kIndexRecordFixedLen + r.entry.fid.size() + 8 * r.page_sums->size();
  }
  EncodeFixed64LE(p + pos, Hash64(p, pos));
  return out;
}

absl::Status CacheDir::WriteIndex(std::string_view encoded) {
  RETURN_IF_ERROR(UnlinkIfPresent(root_fd_, f::kIndexFile));
  RETURN_IF_ERROR(WriteFileAt(root_fd_, f::kIndexTmpFile, encoded));
  if (::renameat(root_fd_, f::kIndexTmpFile, root_fd_, f::kIndexFile) != 0) {
    absl::Status s = ErrnoStatus("cache: rename index");
    ::unlinkat(root_fd_, f::kIndexTmpFile, 0);
    return s;
  }
  return absl::OkStatus();
}

}  // namespace kelp::mount::cache
