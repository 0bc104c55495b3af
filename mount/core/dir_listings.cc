#include "mount/core/dir_listings.h"

namespace kelp::mount {

DirListings::DirListings(size_t max_names, size_t max_seen) : max_names_(max_names), max_seen_(max_seen) {}

DirListings::Known DirListings::Find(uint64_t dir, std::string_view name, uint64_t* ino) {
  std::lock_guard lock(mu_);
  auto it = dirs_.find(dir);
  if (it == dirs_.end()) return Known::kUnknown;
  TouchLocked(it->second);
  auto n = it->second.names.find(std::string(name));
  if (n == it->second.names.end()) return Known::kAbsent;
  *ino = n->second;
  return Known::kPresent;
}

void DirListings::Created(uint64_t dir, uint64_t version) {
  std::lock_guard lock(mu_);
  if (SeenBeyondLocked(dir, version)) return;
  Dir d;
  d.version = version;
  InsertLocked(dir, std::move(d));
}

void DirListings::Listed(uint64_t dir, uint64_t version, std::vector<std::pair<std::string, uint64_t>> names) {
  std::lock_guard lock(mu_);
  if (version == 0 || SeenBeyondLocked(dir, version)) return;
  auto it = dirs_.find(dir);
  if (it != dirs_.end() && it->second.version >= version) return;  // known already, as new or newer
  if (names.size() > max_names_ / 2) return;
  Dir d;
  d.version = version;
  d.names.reserve(names.size());
  for (auto& [name, ino] : names) d.names.emplace(std::move(name), ino);
  InsertLocked(dir, std::move(d));
}

void DirListings::Apply(uint64_t dir, uint64_t version, const Edit& fn) {
  std::lock_guard lock(mu_);
  NoteSeenLocked(dir, version);
  auto it = dirs_.find(dir);
  if (it == dirs_.end()) return;
  Dir& d = it->second;
  if (version == 0) {
    ForgetLocked(dir);  // a change that does not say which version it made
    return;
  }
  if (version <= d.version) return;  // applied already (a reply and its event both bring it)
  if (version != d.version + 1) {
    ForgetLocked(dir);  // a change went missing
    return;
  }
  if (fn) {
    size_t before = d.names.size();
    fn(d.names);
    names_ = names_ - before + d.names.size();
  }
  d.version = version;
  TrimLocked();
}

void DirListings::Added(uint64_t dir, uint64_t version, std::string_view name, uint64_t ino) {
  std::string n(name);
  Apply(dir, version, [&](auto& names) { names[n] = ino; });
}

void DirListings::Removed(uint64_t dir, uint64_t version, std::string_view name) {
  std::string n(name);
  Apply(dir, version, [&](auto& names) { names.erase(n); });
}

void DirListings::Forget(uint64_t dir) {
  std::lock_guard lock(mu_);
  ForgetLocked(dir);
}

void DirListings::Clear() {
  std::lock_guard lock(mu_);
  dirs_.clear();
  lru_.clear();
  names_ = 0;
}

size_t DirListings::dirs() const {
  std::lock_guard lock(mu_);
  return dirs_.size();
}

size_t DirListings::names() const {
  std::lock_guard lock(mu_);
  return names_;
}

void DirListings::NoteSeenLocked(uint64_t dir, uint64_t version) {
  if (seen_.size() >= max_seen_ / 2 && !seen_.count(dir)) {
    seen_old_ = std::move(seen_);
    seen_.clear();
  }
  uint64_t& v = seen_[dir];
  if (version > v) v = version;
}

bool DirListings::SeenBeyondLocked(uint64_t dir, uint64_t version) const {
  for (const auto* m : {&seen_, &seen_old_}) {
    auto it = m->find(dir);
    if (it != m->end() && it->second > version) return true;
  }
  return false;
}

void DirListings::ForgetLocked(uint64_t dir) {
  auto it = dirs_.find(dir);
  if (it == dirs_.end()) return;
  names_ -= it->second.names.size();
  lru_.erase(it->second.lru);
  dirs_.erase(it);
}

void DirListings::InsertLocked(uint64_t dir, Dir d) {
  ForgetLocked(dir);
  names_ += d.names.size();
  lru_.push_front(dir);
  d.lru = lru_.begin();
  dirs_.emplace(dir, std::move(d));
  TrimLocked();
}

void DirListings::TouchLocked(Dir& d) { lru_.splice(lru_.begin(), lru_, d.lru); }

void DirListings::TrimLocked() {
  while (names_ > max_names_ && !lru_.empty()) ForgetLocked(lru_.back());
}

}  // namespace kelp::mount
