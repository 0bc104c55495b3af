#include "mount/cache/entry_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>  // renameat2
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "mount/cache/cache_format.h"
#include "shared/coding.h"
#include "shared/hash.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::mount::cache {
namespace {

namespace f = format;

// Closes an fd on scope exit.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// Reads exactly n bytes at off. A short file is DataLoss (a torn or truncated entry).
absl::Status PreadFull(int fd, char* buf, size_t n, uint64_t off) {
  while (n > 0) {
    ssize_t r = ::pread(fd, buf, n, static_cast<off_t>(off));
    if (r < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("cache: read entry");
    }
    if (r == 0) return absl::DataLossError("cache: entry file is short");
    buf += r;
    n -= static_cast<size_t>(r);
    off += static_cast<uint64_t>(r);
  }
  return absl::OkStatus();
}

uint64_t HeaderSum(const char* header, size_t len) {
  Hasher h;
  h.Update(header, f::kEntryOffHeaderSum);
  h.Update(header + f::kEntryFixedLen, len - f::kEntryFixedLen);
  return h.Digest();
}

std::string EncodeHeader(const EntryRef& e, const std::vector<uint64_t>& sums) {
  std::string out(EntryHeaderLen(e.fid.size(), e.data_len), '\0');
  char* p = out.data();
  EncodeFixed32LE(p + f::kEntryOffMagic, f::kEntryMagic);
  EncodeFixed16LE(p + f::kEntryOffVersion, f::kEntryVersion);
  EncodeFixed16LE(p + f::kEntryOffFidLen, static_cast<uint16_t>(e.fid.size()));
  EncodeFixed64LE(p + f::kEntryOffBlobSize, e.blob_size);
  EncodeFixed64LE(p + f::kEntryOffBlockOffset, e.block_offset);
  EncodeFixed32LE(p + f::kEntryOffDataLen, e.data_len);
  p[f::kEntryOffTier] = static_cast<char>(e.tier);
  EncodeFixed64LE(p + f::kEntryOffEntryId, e.id);
  std::memcpy(p + f::kEntryFixedLen, e.fid.data(), e.fid.size());
  char* table = p + f::kEntryFixedLen + e.fid.size();
  for (size_t i = 0; i < sums.size(); ++i) EncodeFixed64LE(table + 8 * i, sums[i]);
  EncodeFixed64LE(p + f::kEntryOffHeaderSum, HeaderSum(p, out.size()));
  return out;
}

// Checks a complete header buffer; fills *meta (fid left as a view into header).
absl::Status ParseHeader(const char* h, size_t len, EntryRef* meta) {
  if (len < f::kEntryFixedLen || DecodeFixed32LE(h + f::kEntryOffMagic) != f::kEntryMagic ||
      DecodeFixed16LE(h + f::kEntryOffVersion) != f::kEntryVersion) {
    return absl::DataLossError("cache: bad entry magic or version");
  }
  size_t fid_len = DecodeFixed16LE(h + f::kEntryOffFidLen);
  uint32_t data_len = DecodeFixed32LE(h + f::kEntryOffDataLen);
  if (fid_len == 0 || fid_len > f::kMaxFidLen || EntryHeaderLen(fid_len, data_len) != len ||
      static_cast<uint8_t>(h[f::kEntryOffTier]) >= kNumTiers) {
    return absl::DataLossError("cache: bad entry header fields");
  }
  if (HeaderSum(h, len) != DecodeFixed64LE(h + f::kEntryOffHeaderSum)) {
    return absl::DataLossError("cache: entry header checksum mismatch");
  }
  meta->fid = std::string_view(h + f::kEntryFixedLen, fid_len);
  meta->blob_size = DecodeFixed64LE(h + f::kEntryOffBlobSize);
  meta->block_offset = DecodeFixed64LE(h + f::kEntryOffBlockOffset);
  meta->data_len = data_len;
  meta->tier = static_cast<Tier>(h[f::kEntryOffTier]);
  meta->id = DecodeFixed64LE(h + f::kEntryOffEntryId);
  return absl::OkStatus();
}

// The thread's page-aligned scratch buffer (reads that do not cover whole pages), kept at the
// largest size asked; one use at a time.
char* Scratch(size_t n) {
  n = (n + f::kPageSize - 1) / f::kPageSize * f::kPageSize;
  struct Buffer {
    char* p = nullptr;
    size_t size = 0;
    ~Buffer() { std::free(p); }
  };
  thread_local Buffer buf;
  if (buf.size < n) {
    std::free(buf.p);
    buf.p = static_cast<char*>(std::aligned_alloc(f::kPageSize, n));
    if (buf.p == nullptr) throw std::bad_alloc();
    buf.size = n;
  }
  return buf.p;
}

// Writes all of iov[0..iovcnt) at offset 0.
absl::Status PwritevFull(int fd, iovec* v, int iovcnt) {
  uint64_t off = 0;
  while (iovcnt > 0) {
    ssize_t w = ::pwritev(fd, v, iovcnt, static_cast<off_t>(off));
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("cache: write entry");
    }
    off += static_cast<uint64_t>(w);
    size_t left = static_cast<size_t>(w);
    while (iovcnt > 0 && left >= v->iov_len) {
      left -= v->iov_len;
      ++v;
      --iovcnt;
    }
    if (iovcnt > 0) {
      v->iov_base = static_cast<char*>(v->iov_base) + left;
      v->iov_len -= left;
    }
  }
  return absl::OkStatus();
}

}  // namespace

uint64_t EntryHeaderLen(size_t fid_len, uint64_t data_len) {
  return f::kEntryFixedLen + fid_len + 8 * PageCount(data_len);
}

uint64_t EntryDataOffset(size_t fid_len, uint64_t data_len) {
  uint64_t h = EntryHeaderLen(fid_len, data_len);
  return data_len < f::kAlignedDataMin ? h : (h + f::kPageSize - 1) / f::kPageSize * f::kPageSize;
}

std::string EntryFileName(uint64_t id) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s(f::kEntryNameLen, '0');
  for (int i = static_cast<int>(f::kEntryNameLen) - 1; i >= 0; --i, id >>= 4) s[i] = kHex[id & 15];
  return s;
}

bool ParseEntryFileName(std::string_view name, uint64_t* id) {
  if (name.size() != f::kEntryNameLen) return false;
  uint64_t v = 0;
  for (char c : name) {
    int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
    if (d < 0) return false;
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  *id = v;
  return true;
}

std::vector<uint64_t> PageSums(std::string_view data) {
  std::vector<uint64_t> sums(PageCount(data.size()));
  for (size_t i = 0; i < sums.size(); ++i) {
    size_t off = i * f::kPageSize;
    sums[i] = Hash64(data.data() + off, std::min<size_t>(f::kPageSize, data.size() - off));
  }
  return sums;
}

std::string SpareFileName(uint64_t id) { return "spare-" + EntryFileName(id); }

std::string SpareFile::name() const { return entry_name ? EntryFileName(id) : SpareFileName(id); }

absl::Status MakeSpare(int dirfd, uint64_t id) {
  std::string name = EntryFileName(id), spare = SpareFileName(id);
  if (::renameat(dirfd, name.c_str(), dirfd, spare.c_str()) != 0) return ErrnoStatus("cache: rename entry");
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> WriteEntryFile(int dirfd, const EntryRef& entry,
                                        const std::vector<uint64_t>& sums, std::string_view data,
                                        SpareFile* spare) {
  if (entry.fid.empty() || entry.fid.size() > f::kMaxFidLen || data.size() != entry.data_len ||
      sums.size() != PageCount(data.size())) {
    if (spare != nullptr) ::unlinkat(spare->dirfd, spare->name().c_str(), 0);
    return absl::InvalidArgumentError("cache: entry fid, size or checksums out of range");
  }
  std::string name = EntryFileName(entry.id);
  int flags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC;
  if (spare != nullptr) {
    // Renaming a spare into place allocates no inode. On ext4 without a journal a new
    // inode is searched for past every one freed in the last minutes, which a cache that
    // evicts as fast as it inserts frees all the time: that search was half of the mount's
    // CPU in a sequential write.
    std::string from = spare->name();
    if (::renameat2(spare->dirfd, from.c_str(), dirfd, name.c_str(), RENAME_NOREPLACE) == 0) {
      // Written over in place: its blocks are allocated already and its pages may still be in
      // the page cache. Not O_TRUNC: ext4 takes a truncate to 0 for a file being replaced and
      // starts its writeback at close (auto_da_alloc), which made reuse slower than creating.
      flags = O_WRONLY | O_NOFOLLOW | O_CLOEXEC;
    } else {
      ::unlinkat(spare->dirfd, from.c_str(), 0);
    }
  }
  // A plain write, through the page cache: the kernel writes it back when it has the time
  // (dirty_expire), so a burst of writes gives the device to the volume server first (its
  // bytes are what fsync waits for) and the cache's copy goes out after. Written with O_DIRECT
  // instead, every byte of a sequential write reached this one disk twice while the writer
  // waited (1 GiB fio seq write after sysbench, balanced: 557 / 439 MiB/s plain, 401 / 322
  // direct). A cache entry needs no durability: a torn one fails its checksums and is dropped.
  Fd fd(::openat(dirfd, name.c_str(), flags, 0644));
  if (fd.get() < 0) {
    absl::Status status = ErrnoStatus("cache: create entry");
    if (!(flags & O_CREAT)) ::unlinkat(dirfd, name.c_str(), 0);  // the spare, renamed already
    return status;
  }
  std::string header = EncodeHeader(entry, sums);
  header.resize(EntryDataOffset(entry.fid.size(), data.size()), '\0');
  iovec iov[2] = {{header.data(), header.size()}, {const_cast<char*>(data.data()), data.size()}};
  absl::Status status = PwritevFull(fd.get(), iov, 2);
  struct stat st;
  if (status.ok() && ::fstat(fd.get(), &st) != 0) status = ErrnoStatus("cache: stat entry");
  // A spare longer than this entry: its tail goes (the size is part of the format).
  const off_t size = static_cast<off_t>(header.size() + data.size());
  if (status.ok() && st.st_size > size) {
    if (::ftruncate(fd.get(), size) != 0 || ::fstat(fd.get(), &st) != 0)
      status = ErrnoStatus("cache: cut entry");
  }
  if (status.ok() && ::close(fd.release()) != 0) status = ErrnoStatus("cache: close entry");
  if (!status.ok()) {
    ::unlinkat(dirfd, name.c_str(), 0);
    return status;
  }
  if (spare != nullptr) spare->reused = !(flags & O_CREAT);
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

absl::StatusOr<int> OpenEntryFile(int dirfd, uint64_t id) {
  std::string name = EntryFileName(id);
  int fd = ::openat(dirfd, name.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("cache: open entry");
  return fd;
}

absl::Status ReadEntryData(int fd, const EntryRef& entry, const uint64_t* range_sums,
                           uint64_t offset, size_t len, char* dst) {
  if (offset + len > entry.data_len) return absl::OutOfRangeError("cache: read past entry");
  if (len == 0) return absl::OkStatus();
  uint64_t header_len = EntryDataOffset(entry.fid.size(), entry.data_len);
  uint64_t first = offset / f::kPageSize, last = (offset + len - 1) / f::kPageSize;
  uint64_t begin = first * f::kPageSize;
  uint64_t end = std::min<uint64_t>((last + 1) * f::kPageSize, entry.data_len);
  // Page-aligned ranges (and ranges ending at the data's end) land in dst directly.
  bool direct = begin == offset && end == offset + len;
  char* buf = direct ? dst : Scratch(end - begin);
  if (absl::Status s = PreadFull(fd, buf, end - begin, header_len + begin); !s.ok()) return s;
  for (uint64_t p = first; p <= last; ++p) {
    uint64_t off = p * f::kPageSize;
    size_t n = std::min<uint64_t>(f::kPageSize, entry.data_len - off);
    if (Hash64(buf + (off - begin), n) != range_sums[p - first]) {
      return absl::DataLossError(kelp::StrCat("cache: checksum mismatch in page ", p));
    }
  }
  if (!direct) std::memcpy(dst, buf + (offset - begin), len);
  return absl::OkStatus();
}

absl::StatusOr<EntryMeta> ReadEntryHeader(int dirfd, uint64_t id, Tier tier, uint64_t file_size) {
  std::string name = EntryFileName(id);
  Fd fd(::openat(dirfd, name.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoStatus("cache: open entry");
  if (file_size < f::kEntryFixedLen) return absl::DataLossError("cache: entry file too short");
  char fixed[f::kEntryFixedLen];
  if (absl::Status s = PreadFull(fd.get(), fixed, sizeof fixed, 0); !s.ok()) return s;
  size_t fid_len = DecodeFixed16LE(fixed + f::kEntryOffFidLen);
  uint32_t data_len = DecodeFixed32LE(fixed + f::kEntryOffDataLen);
  uint64_t header_len = EntryHeaderLen(fid_len, data_len);
  if (fid_len > f::kMaxFidLen || EntryFileSize(fid_len, data_len) != file_size) {
    return absl::DataLossError("cache: entry file size does not match its header");
  }
  std::vector<char> header(header_len);
  if (absl::Status s = PreadFull(fd.get(), header.data(), header_len, 0); !s.ok()) return s;
  EntryRef got;
  if (absl::Status s = ParseHeader(header.data(), header_len, &got); !s.ok()) return s;
  if (got.id != id || got.tier != tier) return absl::DataLossError("cache: entry in wrong place");
  EntryMeta meta;
  meta.fid = std::string(got.fid);
  meta.blob_size = got.blob_size;
  meta.block_offset = got.block_offset;
  meta.data_len = got.data_len;
  meta.tier = got.tier;
  meta.id = got.id;
  const char* table = header.data() + f::kEntryFixedLen + fid_len;
  meta.page_sums.resize(PageCount(data_len));
  for (size_t i = 0; i < meta.page_sums.size(); ++i) meta.page_sums[i] = DecodeFixed64LE(table + 8 * i);
  return meta;
}

}  // namespace kelp::mount::cache
