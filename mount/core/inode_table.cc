#include "mount/core/inode_table.h"

namespace kelp::mount {

void InodeTable::MaybeDropLocked(std::unordered_map<uint64_t, Inode>::iterator it) {
  if (it->second.nlookup == 0 && it->second.open_handles == 0) inodes_.erase(it);
}

void InodeTable::AddLookup(uint64_t ino, uint64_t n) {
  MutexLock lock(mu_);
  inodes_[ino].nlookup += n;
}

void InodeTable::Forget(uint64_t ino, uint64_t n) {
  MutexLock lock(mu_);
  auto it = inodes_.find(ino);
  if (it == inodes_.end()) return;
  it->second.nlookup = n >= it->second.nlookup ? 0 : it->second.nlookup - n;
  MaybeDropLocked(it);
}

uint64_t InodeTable::lookups(uint64_t ino) const {
  MutexLock lock(mu_);
  auto it = inodes_.find(ino);
  return it == inodes_.end() ? 0 : it->second.nlookup;
}

std::shared_ptr<FileData> InodeTable::OpenFile(FileContext* ctx, const Attr& attr, bool* first) {
  MutexLock lock(mu_);
  Inode& in = inodes_[attr.ino()];
  *first = in.open_handles == 0;
  ++in.open_handles;
  if (!in.file) in.file = std::make_shared<FileData>(ctx, attr);
  return in.file;
}

bool InodeTable::CloseFile(uint64_t ino) {
  MutexLock lock(mu_);
  auto it = inodes_.find(ino);
  if (it == inodes_.end() || it->second.open_handles == 0) return false;
  if (--it->second.open_handles > 0) return false;
  it->second.file->HandOverUnsynced();
  it->second.file.reset();
  MaybeDropLocked(it);
  return true;
}

std::shared_ptr<FileData> InodeTable::File(uint64_t ino) const {
  MutexLock lock(mu_);
  auto it = inodes_.find(ino);
  return it == inodes_.end() ? nullptr : it->second.file;
}

std::vector<std::shared_ptr<FileData>> InodeTable::OpenFiles() const {
  MutexLock lock(mu_);
  std::vector<std::shared_ptr<FileData>> out;
  for (const auto& [ino, in] : inodes_) {
    if (in.file) out.push_back(in.file);
  }
  return out;
}

std::vector<uint64_t> InodeTable::OpenInodes() const {
  MutexLock lock(mu_);
  std::vector<uint64_t> out;
  for (const auto& [ino, in] : inodes_) {
    if (in.open_handles > 0) out.push_back(ino);
  }
  return out;
}

std::vector<uint64_t> InodeTable::KnownInodes() const {
  MutexLock lock(mu_);
  std::vector<uint64_t> out;
  out.reserve(inodes_.size());
  for (const auto& [ino, in] : inodes_) out.push_back(ino);
  return out;
}

bool InodeTable::SetCachedVersion(uint64_t ino, uint64_t version) {
  MutexLock lock(mu_);
  auto it = inodes_.find(ino);
  if (it == inodes_.end()) return false;
  bool same = it->second.cached_version == version;
  it->second.cached_version = version;
  return same;
}

size_t InodeTable::size() const {
  MutexLock lock(mu_);
  return inodes_.size();
}

}  // namespace kelp::mount
