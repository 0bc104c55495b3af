#include "mount/core/meta_cache.h"

namespace kelp::mount {

MetaCache::MetaCache(std::chrono::nanoseconds attr_ttl, std::chrono::nanoseconds entry_ttl, size_t max_entries)
    : attr_ttl_(attr_ttl), entry_ttl_(entry_ttl), max_entries_(max_entries) {}

std::optional<filer::Attr> MetaCache::GetAttr(uint64_t ino) {
  if (attr_ttl_.count() == 0) return std::nullopt;
  MutexLock lock(mu_);
  auto it = attrs_.find(ino);
  if (it == attrs_.end()) return std::nullopt;
  if (Clock::now() >= it->second.expires) {
    attrs_.erase(it);
    return std::nullopt;
  }
  return it->second.attr;
}

void MetaCache::PutAttr(const filer::Attr& attr) {
  MutexLock lock(mu_);
  if ((attr.mode() & 0170000) == 0040000) {
    if (dir_mode_gid_.size() >= max_entries_) dir_mode_gid_.clear();
    dir_mode_gid_[attr.ino()] = {attr.mode(), attr.gid()};
  }
  if (entry_ttl_.count() > 0) {
    EntryKey all{attr.ino(), std::string()};
    auto now = Clock::now();
    auto changed = xattrs_changed_.find(attr.ino());
    bool quarantined = changed != xattrs_changed_.end() && now < changed->second;
    if (!attr.no_xattrs()) {
      no_xattr_.erase(all);
    } else if (!quarantined) {
      if (no_xattr_.size() >= max_entries_) no_xattr_.clear();
      no_xattr_[all] = now + entry_ttl_;
    }
  }
  if (attr_ttl_.count() == 0) return;
  if (attrs_.size() >= max_entries_) {
    // Crude bound: drop expired ones, and everything if that is not enough.
    auto now = Clock::now();
    for (auto it = attrs_.begin(); it != attrs_.end();) it = it->second.expires <= now ? attrs_.erase(it) : std::next(it);
    if (attrs_.size() >= max_entries_) attrs_.clear();
  }
  auto& item = attrs_[attr.ino()];
  // Never replace newer attributes with older ones (replies can cross events).
  if (item.attr.ino() == attr.ino() && item.attr.version() > attr.version()) return;
  item.attr = attr;
  item.expires = Clock::now() + attr_ttl_;
}

void MetaCache::DropAttr(uint64_t ino) {
  MutexLock lock(mu_);
  attrs_.erase(ino);
}

std::optional<uint64_t> MetaCache::GetEntry(uint64_t parent, std::string_view name) {
  if (entry_ttl_.count() == 0) return std::nullopt;
  MutexLock lock(mu_);
  auto it = entries_.find(EntryKey{parent, std::string(name)});
  if (it == entries_.end()) return std::nullopt;
  if (Clock::now() >= it->second.expires) {
    entries_.erase(it);
    return std::nullopt;
  }
  return it->second.ino;
}

void MetaCache::PutEntry(uint64_t parent, std::string_view name, uint64_t ino) {
  if (entry_ttl_.count() == 0) return;
  MutexLock lock(mu_);
  if (entries_.size() >= max_entries_) {
    auto now = Clock::now();
    for (auto it = entries_.begin(); it != entries_.end();) {
      it = it->second.expires <= now ? entries_.erase(it) : std::next(it);
    }
    if (entries_.size() >= max_entries_) entries_.clear();
  }
  entries_[EntryKey{parent, std::string(name)}] = EntryItem{ino, Clock::now() + entry_ttl_};
}

void MetaCache::DropEntry(uint64_t parent, std::string_view name) {
  MutexLock lock(mu_);
  entries_.erase(EntryKey{parent, std::string(name)});
}

void MetaCache::DropDir(uint64_t parent) {
  MutexLock lock(mu_);
  auto it = entries_.lower_bound(EntryKey{parent, std::string()});
  while (it != entries_.end() && it->first.first == parent) it = entries_.erase(it);
}

bool MetaCache::HasNoXattr(uint64_t ino, std::string_view name) {
  if (entry_ttl_.count() == 0) return false;
  MutexLock lock(mu_);
  return FreshNoXattrLocked(EntryKey{ino, std::string()}) ||
         (!name.empty() && FreshNoXattrLocked(EntryKey{ino, std::string(name)}));
}

bool MetaCache::FreshNoXattrLocked(const EntryKey& key) {
  auto it = no_xattr_.find(key);
  if (it == no_xattr_.end()) return false;
  if (Clock::now() >= it->second) {
    no_xattr_.erase(it);
    return false;
  }
  return true;
}

bool MetaCache::HasNoXattrs(uint64_t ino) { return HasNoXattr(ino, std::string_view()); }

void MetaCache::PutNoXattr(uint64_t ino, std::string_view name) {
  if (entry_ttl_.count() == 0) return;
  MutexLock lock(mu_);
  if (no_xattr_.size() >= max_entries_) no_xattr_.clear();
  no_xattr_[EntryKey{ino, std::string(name)}] = Clock::now() + entry_ttl_;
}

void MetaCache::DropXattrs(uint64_t ino) {
  MutexLock lock(mu_);
  auto now = Clock::now();
  if (xattrs_changed_.size() >= max_entries_) {
    for (auto it = xattrs_changed_.begin(); it != xattrs_changed_.end();) {
      it = it->second <= now ? xattrs_changed_.erase(it) : std::next(it);
    }
    if (xattrs_changed_.size() >= max_entries_) xattrs_changed_.clear();
  }
  xattrs_changed_[ino] = now + kXattrQuarantine;
  auto it = no_xattr_.lower_bound(EntryKey{ino, std::string()});
  while (it != no_xattr_.end() && it->first.first == ino) it = no_xattr_.erase(it);
}

std::optional<std::pair<uint32_t, uint32_t>> MetaCache::DirModeGid(uint64_t ino) {
  MutexLock lock(mu_);
  auto it = dir_mode_gid_.find(ino);
  if (it == dir_mode_gid_.end()) return std::nullopt;
  return it->second;
}

void MetaCache::Clear() {
  MutexLock lock(mu_);
  dir_mode_gid_.clear();
  no_xattr_.clear();
  attrs_.clear();
  entries_.clear();
}

size_t MetaCache::size() const {
  MutexLock lock(mu_);
  return attrs_.size() + entries_.size();
}

}  // namespace kelp::mount
