// InodeTable: what the mount remembers per inode number (the filer's numbers): the kernel's
// lookup count (so forget can drop the rest), open handles in this mount, the FileData
// shared by those handles, and the content version the kernel's page cache may hold (to decide
// keep_cache on open).
//
// Thread-safety: every method may be called from any thread; one mutex held for map work only.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "mount/core/file_data.h"
#include "shared/mutex.h"

namespace kelp::mount {

class InodeTable {
 public:
  void AddLookup(uint64_t ino, uint64_t n = 1);
  void Forget(uint64_t ino, uint64_t n);
  uint64_t lookups(uint64_t ino) const;

  // Registers an open handle of the file, creating its FileData from attr when it has none.
  // *first is true when this is the inode's first open handle in the mount.
  std::shared_ptr<FileData> OpenFile(FileContext* ctx, const Attr& attr, bool* first);
  // Unregisters a handle; true when it was the last one (the FileData is dropped then).
  bool CloseFile(uint64_t ino);
  std::shared_ptr<FileData> File(uint64_t ino) const;  // null when not open
  std::vector<std::shared_ptr<FileData>> OpenFiles() const;
  std::vector<uint64_t> OpenInodes() const;
  std::vector<uint64_t> KnownInodes() const;

  // Records that the kernel may now cache content of the given version. Returns true when it
  // already held that version (its page cache may be kept).
  bool SetCachedVersion(uint64_t ino, uint64_t version);

  size_t size() const;

 private:
  struct Inode {
    uint64_t nlookup = 0;
    int open_handles = 0;
    std::shared_ptr<FileData> file;
    uint64_t cached_version = 0;
  };
  void MaybeDropLocked(std::unordered_map<uint64_t, Inode>::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Lock order: after DirHandle::mu (fs_dirs.cc), before FileData::mu_ (CloseFile hands a
  // closed file's unsynced volumes over, and may destroy the FileData, under it).
  mutable Mutex mu_;
  std::unordered_map<uint64_t, Inode> inodes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kelp::mount
