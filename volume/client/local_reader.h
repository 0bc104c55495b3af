// Local reads: a client on the same machine as a volume server reads a blob straight from the
// volume's .dat file instead of through the server's HTTP data plane (docs/volume-http.md,
// "Local reads"). The server says where the needle is (GET /<fid> with X-Kelp-Local-Read,
// answered only to 127.0.0.0/8); the bytes then come from the file in one preadv into the
// reader's buffer and are checked as the server checks them: the needle's header must name
// this key, cookie and size, and the data must match the xxHash3 in its footer. A vacuum
// renames a new .dat over the path: a file kept open is used only while it is still the one at
// the path (same inode), and a vacuum between the server's answer and the read shows in the
// needle's header (the read is tried once more with a fresh answer).
//
// Thread-safety: LocalReader is thread-safe; mu_ guards the open files and is never held
// across I/O.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "shared/http/http_parser.h"
#include "shared/mutex.h"

namespace kelp::volume {

inline constexpr std::string_view kLocalReadHeader = "X-Kelp-Local-Read";
inline constexpr std::string_view kDatPathHeader = "X-Kelp-Dat";
inline constexpr std::string_view kNeedleOffsetHeader = "X-Kelp-Needle-Offset";
inline constexpr std::string_view kNeedleSizeHeader = "X-Kelp-Needle-Size";

// Where a needle sits: its .dat (an absolute path ending in ".dat"), the needle's offset in it
// and its data size.
struct NeedleLocation {
  std::string dat_path;
  uint64_t offset = 0;
  uint32_t size = 0;
};
// The location in a server's answer. InvalidArgument when a field is missing or malformed.
absl::StatusOr<NeedleLocation> ParseNeedleLocation(const http::Headers& headers);

class VolumeClient;

class LocalReader {
 public:
  explicit LocalReader(VolumeClient* client);  // client must outlive this
  ~LocalReader();

  // Reads all the data of blob fid (len bytes, its whole size) from the .dat of the server at
  // url into dst. Errors: EROFS or Unimplemented, the server does not answer local reads to
  // this process; PermissionDenied, this process cannot open the file; ENOENT, no such blob;
  // FailedPrecondition, the blob is not len bytes long; Aborted, the needle was not where the
  // server said (twice); Unavailable, the server did not answer; DataLoss, the bytes in the
  // file fail their checksum. Nothing is promised about dst after an error.
  absl::Status Read(std::string_view url, std::string_view fid, char* dst, size_t len);
  // Whether blob fid on the server at url can be read locally: Read's errors, with only the
  // needle's header read.
  absl::Status Probe(std::string_view url, std::string_view fid);

 private:
  struct Dat;
  absl::Status ReadNeedle(std::string_view url, std::string_view fid, char* dst, size_t len,
                          bool header_only);
  // Needles of at least this many bytes are read with O_DIRECT where the file system has it:
  // straight from the device into a buffer of the thread's, not through the page cache, whose
  // fresh pages cost more than the copy out of them (the volume drops what it wrote from the
  // page cache, so a stream's needles are not there to be found anyway).
  static constexpr size_t kDirectMin = 1 << 20;
  // The buffer is kept for the thread's next read: one per thread that reads a large needle,
  // as large as the largest it read (4 MiB and 8 KiB with the defaults; a mount's prefetch and
  // FUSE threads together hold some tens of MiB this way).
  // The needle at offset with len bytes of data, read with O_DIRECT into the thread's buffer:
  // its header starts at the returned pointer + offset % 4096. Null when that failed (the
  // caller reads through the page cache).
  static char* DirectRead(const Dat& dat, uint64_t offset, size_t len);
  // The file at path, opened: the one kept open if it is still the file there, else a fresh
  // open that replaces it. PermissionDenied when this process cannot open it.
  absl::StatusOr<std::shared_ptr<Dat>> Open(const std::string& path);

  VolumeClient* const client_;
  Mutex mu_;
  std::map<std::string, std::shared_ptr<Dat>> files_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kelp::volume
