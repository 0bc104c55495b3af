// The filesystem operations both HTTP dialects share, by path: stat, mkdir (-p), create,
// write (replace, append, at an offset; inline when small, else split into blobs),
// remove (recursive), rename, chmod, touch, truncate, symlink. Everything goes through
// FilerService, so mounts see HTTP changes through the event stream like any other.
//
// A write that replaces a file is one atomic commit (CommitChunks with replace, or
// WriteInline): readers see the old content or the new, never a mix. Appends and writes at
// an offset are not atomic with respect to other writers of the same file (the offset of an
// append is the size read just before).
//
// Threads: thread-safe; one instance serves every request.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "filer/core/filer_service.h"
#include "volume/client/blob_store.h"
#include "filer/http/body.h"
#include "filer/http/path.h"

namespace kelp::filer {

// The extended attribute that keeps the Content-Type a file was uploaded with (SeaweedFS
// keeps it as the entry's Mime). A mount shows it like any other xattr.
inline constexpr char kMimeXattr[] = "user.mime";

struct FileWrite {
  enum class Mode {
    kReplace,  // the body becomes the whole content, written at offset (0 unless AGFS says)
    kAt,       // the body overwrites [offset, offset + n); the rest stays
    kAppend,   // the body goes after the current end
  };
  Mode mode = Mode::kReplace;
  uint64_t offset = 0;
  bool create = true;        // create the file when it is missing
  bool exclusive = false;    // EEXIST when it exists
  bool make_parents = true;  // create missing parent directories (else ENOENT)
  bool sync = false;         // sync the filer's WAL before answering
  int64_t size_hint = -1;    // the body's Content-Length, -1 when unknown
  std::string mime;          // stored with the file when not empty
};

struct FileWriteResult {
  Attr attr;
  uint64_t written = 0;
};

class FileOps {
 public:
  struct Options {
    // Largest blob a write is split into, in bytes (the filer's -maxMB). Default: 4 MiB.
    size_t blob_size = 4 << 20;
    // Permission bits of files and directories created over HTTP. Default: 0644, 0755.
    uint32_t file_mode = 0644;
    uint32_t dir_mode = 0755;
  };
  // fs and io are not owned and must outlive this. New entries belong to the filer
  // process's uid and gid, as in SeaweedFS.
  FileOps(FilerService* fs, volume::BlobStore* io, Options options);

  FilerService* core() { return fs_; }
  volume::BlobStore* io() { return io_; }

  absl::StatusOr<Attr> Stat(const CleanPath& p) { return fs_->ResolvePath(p.path); }
  // mkdir -p: every missing directory on the way is created; ENOTDIR when a component is
  // not a directory.
  absl::StatusOr<Attr> MkdirAll(std::string_view path, uint32_t mode);
  // mkdir: the parent must exist (ENOENT); EEXIST when p exists.
  absl::StatusOr<Attr> Mkdir(const CleanPath& p, uint32_t mode);
  // An empty regular file (the parent must exist). exclusive: EEXIST when p exists; else an
  // existing regular file is returned as is.
  absl::StatusOr<Attr> CreateFile(const CleanPath& p, bool exclusive);
  absl::StatusOr<FileWriteResult> Write(const CleanPath& p, BodySource& body, const FileWrite& w);
  // A file, a symlink or an empty directory; recursive: a whole tree.
  absl::Status Remove(const CleanPath& p, bool recursive);
  // to's parent must exist; an existing target is replaced as rename(2) does.
  absl::StatusOr<Attr> Rename(const CleanPath& from, const CleanPath& to);
  absl::StatusOr<Attr> Chmod(const CleanPath& p, uint32_t mode);
  // Sets atime and mtime to now; creates an empty file when p is missing.
  absl::StatusOr<Attr> Touch(const CleanPath& p);
  absl::StatusOr<Attr> Truncate(const CleanPath& p, uint64_t size);
  absl::StatusOr<Attr> Symlink(const CleanPath& link, std::string_view target);

  // The directory p names (ENOTDIR if it is something else).
  absl::StatusOr<Attr> ResolveDir(std::string_view path);

 private:
  // A new entry owned by the filer process's uid and gid.
  CreateArgs Entry(uint64_t parent, std::string_view name, uint32_t mode, bool exclusive) const;
  // The file to write: existing, or created as w allows.
  absl::StatusOr<Attr> OpenForWrite(const CleanPath& p, const FileWrite& w, bool* created);
  absl::StatusOr<FileWriteResult> WriteBody(const Attr& file, BodySource& body, const FileWrite& w);

  FilerService* const fs_;
  volume::BlobStore* const io_;
  const Options opts_;
  const uint32_t uid_;
  const uint32_t gid_;
};

}  // namespace kelp::filer
