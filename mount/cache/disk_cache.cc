#include "mount/cache/disk_cache.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <optional>
#include <thread>

#include "absl/container/inlined_vector.h"
#include "mount/cache/cache_format.h"
#include "mount/cache/entry_file.h"
#include "shared/log.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::mount::cache {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

uint64_t RoundUp(uint64_t v, uint64_t unit) { return (v + unit - 1) / unit * unit; }

}  // namespace

class DiskCache::OpGuard {
 public:
  explicit OpGuard(DiskCache* cache) : cache_(cache) {
    cache_->inflight_.fetch_add(1);
    ok_ = !cache_->closed_.load();
  }
  ~OpGuard() { cache_->inflight_.fetch_sub(1); }
  explicit operator bool() const { return ok_; }

 private:
  DiskCache* cache_;
  bool ok_;
};

DiskCache::OpenFile::~OpenFile() { ::close(fd); }

std::unique_ptr<DiskCache> DiskCache::Open(const Config& config, CacheCounters* counters) {
  absl::StatusOr<std::unique_ptr<CacheDir>> dir = CacheDir::Open(config.dir, config.layout);
  if (!dir.ok()) {
    spdlog::warn("cache: disk tiers off, {} is unusable: {}", config.dir, dir.status());
    return nullptr;
  }
  ScanResult scan = (*dir)->Scan(config.layout);
  std::unique_ptr<DiskCache> cache(new DiskCache(config, counters, std::move(*dir)));
  cache->Load(std::move(scan));
  return cache;
}

DiskCache::DiskCache(const Config& config, CacheCounters* counters, std::unique_ptr<CacheDir> dir)
    : config_(config),
      counters_(counters),
      dir_(std::move(dir)),
      fs_block_(dir_->block_size()),
      max_spares_(MaxSpares(config)) {
  {
    MutexLock lock(mu_);
    for (TierState& t : tiers_) t.policy = MakeEvictionPolicy(config_.eviction);
  }
  forget_thread_ = std::thread([this] { ForgetLoop(); });
}

DiskCache::~DiskCache() { Close(); }

size_t DiskCache::MaxSpares(const Config& config) {
  uint64_t per_block = config.layout.large_block > 0 ? config.capacity_bytes / config.layout.large_block : 0;
  return static_cast<size_t>(std::clamp<uint64_t>(per_block, 256, 16384));
}

void DiskCache::Load(ScanResult scan) {
  std::vector<Victim> victims;
  size_t entries = 0, duplicates = 0;
  uint64_t bytes = 0;
  uint64_t root_meta = dir_->MeasureRootMeta();
  std::array<uint64_t, kNumTiers> dir_bytes;
  for (int t = 0; t < kNumTiers; ++t) dir_bytes[t] = dir_->MeasureTierDir(static_cast<Tier>(t));
  {
    MutexLock lock(mu_);
    next_id_ = scan.next_id;
    root_meta_bytes_ = root_meta;
    for (int t = 0; t < kNumTiers; ++t) {
      TierState& ts = tiers_[t];
      ts.dir_bytes = dir_bytes[t];
      for (ScannedEntry& e : scan.tiers[t]) {
        uint64_t key = BlockKey(e.meta.fid, e.meta.block_offset);
        if (ts.index.contains(key)) {  // the same block twice (a crash between two sessions)
          // Deleted, not kept as a spare: its bytes are counted nowhere.
          victims.push_back({static_cast<Tier>(t), e.meta.id, 0, nullptr, /*reusable=*/false});
          ++duplicates;
          continue;
        }
        ts.index.emplace(key, Entry{std::move(e.meta.fid), e.meta.blob_size, e.meta.block_offset,
                                    e.meta.data_len, e.meta.id, e.disk_bytes, false,
                                    std::move(e.meta.page_sums), nullptr, 0});
        ts.policy->Add(key, e.disk_bytes, e.policy_state);
        ts.live_bytes += e.disk_bytes;
      }
      entries += ts.index.size();
      bytes += ts.live_bytes;
    }
    // The capacity may have shrunk since the last run.
    EvictLocked(kNumTiers - 1, 0, DataBudgetLocked(), &victims);
  }
  size_t evicted = victims.size() - duplicates;
  Unlink(std::move(victims));
  spdlog::info(
      "cache: opened {}: {} entries, {:.1f} MiB ({} from the index, {} dropped, {} "
      "duplicates, {} evicted to fit)",
      dir_->path(), entries, static_cast<double>(bytes) / (1 << 20), scan.from_index, scan.dropped,
      duplicates, evicted);
}

uint64_t DiskCache::DataBudgetLocked() const {
  uint64_t meta = root_meta_bytes_ + format::kMetaSlackBytes;
  for (const TierState& t : tiers_) meta += t.dir_bytes;
  return config_.capacity_bytes > meta ? config_.capacity_bytes - meta : 0;
}

uint64_t DiskCache::GuaranteeLocked(int tier) const {
  return DataBudgetLocked() / 100 * config_.shares_percent[tier];
}

bool DiskCache::HasRoom(uint64_t bytes) const {
  // An entry's header and the rounding to file system blocks: one block more per entry, at
  // most; the caller asks about a block or a few. And a sixteenth of the budget to spare: a
  // full cache frees room a few KiB at a time (journaled bytes forgotten once the filer moved
  // them), and that is not room for a working set bigger than the cache.
  MutexLock lock(mu_);
  const uint64_t budget = DataBudgetLocked();
  const uint64_t need = RoundUp(bytes, fs_block_) + fs_block_ + budget / 16;
  return UsedLocked() - spare_bytes_ + need <= budget;
}

uint64_t DiskCache::UsedLocked() const {
  uint64_t used = deleting_bytes_ + leaked_bytes_ + spare_bytes_;
  for (const TierState& t : tiers_) used += t.usage();
  return used;
}

// The tier to evict from to make room for `need` bytes in `for_tier`: the tier itself once it
// holds its share, else the tier most over its share, so a tier under its share never loses
// entries to another tier's inserts.
int DiskCache::VictimTierLocked(int for_tier, uint64_t need) const {
  const TierState& own = tiers_[for_tier];
  if (own.policy->size() > 0 && own.usage() + need > GuaranteeLocked(for_tier)) return for_tier;
  int best = -1;
  uint64_t best_over = 0;
  for (int t = 0; t < kNumTiers; ++t) {
    uint64_t usage = tiers_[t].usage(), guarantee = GuaranteeLocked(t);
    if (t == for_tier || tiers_[t].policy->size() == 0 || usage <= guarantee) continue;
    if (usage - guarantee > best_over) {
      best = t;
      best_over = usage - guarantee;
    }
  }
  if (best >= 0) return best;
  if (own.policy->size() > 0) return for_tier;
  // Every tier is within its share and for_tier has nothing published yet: the room is held by
  // metadata or by deletes in flight. Take from whichever tier has entries, largest first.
  for (int t = kNumTiers - 1; t >= 0; --t) {
    if (tiers_[t].policy->size() > 0) return t;
  }
  return -1;
}

void DiskCache::EvictLocked(int for_tier, uint64_t need, uint64_t budget,
                            std::vector<Victim>* victims) {
  // Bytes being deleted (by this call or another thread) are as good as free: whoever deletes
  // them stops counting them right after the unlink.
  while (!FitsLocked(need, budget)) {
    int t = VictimTierLocked(for_tier, need);
    if (t < 0) return;
    TierState& ts = tiers_[t];
    std::optional<uint64_t> key = ts.policy->Evict();
    if (!key) return;
    auto it = ts.index.find(*key);
    if (it == ts.index.end()) continue;  // cannot happen: the policy tracks published entries
    victims->push_back(RemoveLocked(t, it, /*reusable=*/true));
    deleting_bytes_ += victims->back().bytes;
    counters_->Evicted(static_cast<Tier>(t));
  }
}

DiskCache::Victim DiskCache::RemoveLocked(int t, absl::flat_hash_map<uint64_t, Entry>::iterator it,
                                          bool reusable) {
  TierState& ts = tiers_[t];
  Victim v{static_cast<Tier>(t), it->second.id, it->second.disk_bytes, std::move(it->second.file), reusable};
  ts.live_bytes -= v.bytes;
  ts.index.erase(it);
  return v;
}

void DiskCache::Unlink(std::vector<Victim> victims) {
  if (victims.empty()) return;
  if (config_.testing_before_delete) config_.testing_before_delete();
  size_t room;
  {
    MutexLock lock(mu_);
    size_t held = spares_.size() + spares_claimed_;
    // Closing: nothing will reuse them.
    room = held < max_spares_ && !closed_.load() ? std::min(victims.size(), max_spares_ - held) : 0;
    spares_claimed_ += room;
  }
  const size_t claimed = room;
  std::vector<Spare> made;
  uint64_t done = 0, failed = 0;
  for (Victim& v : victims) {
    // A file a reader still holds is not reused (it may still be reading it); any other is
    // closed first, so emptying or unlinking it frees the blocks at once.
    bool reuse = v.reusable && (v.file == nullptr || v.file.use_count() == 1);
    v.file.reset();
    int dirfd = dir_->tier_fd(v.tier);
    if (reuse && room > 0 && MakeSpare(dirfd, v.id).ok()) {
      --room;
      made.push_back({v.tier, v.id, v.bytes});
      continue;
    }
    std::string name = EntryFileName(v.id);
    if (::unlinkat(dirfd, name.c_str(), 0) == 0 || errno == ENOENT) {
      done += v.bytes;
    } else {
      // Still on disk, so still counted; the next open's scan picks it up again.
      failed += v.bytes;
      counters_->DiskError();
    }
  }
  std::vector<Spare> trimmed;
  {
    MutexLock lock(mu_);
    spares_claimed_ -= claimed;
    spares_.insert(spares_.end(), made.begin(), made.end());
    for (const Spare& spare : made) {
      deleting_bytes_ -= spare.bytes;
      spare_bytes_ += spare.bytes;
    }
    deleting_bytes_ -= done + failed;
    leaked_bytes_ += failed;
    // Kept only while the files on disk fit the capacity (not, say, what a shrunk capacity
    // evicted at open).
    trimmed = TrimSparesLocked();
  }
  UnlinkSpares(trimmed);
}

std::vector<DiskCache::Spare> DiskCache::TrimSparesLocked() {
  std::vector<Spare> trimmed;
  const uint64_t budget = DataBudgetLocked();
  // Not counting the room reserved by writes in flight: each of them takes a spare if one is
  // left, and trims after itself.
  uint64_t writing = 0;
  for (const TierState& t : tiers_) writing += t.writing_bytes;
  uint64_t over = UsedLocked() - deleting_bytes_ - writing;
  size_t n = 0;
  for (; n < spares_.size() && over > budget; ++n) {
    over -= spares_[n].bytes;
    spare_bytes_ -= spares_[n].bytes;
    deleting_bytes_ += spares_[n].bytes;
  }
  trimmed.assign(spares_.begin(), spares_.begin() + static_cast<std::ptrdiff_t>(n));
  spares_.erase(spares_.begin(), spares_.begin() + static_cast<std::ptrdiff_t>(n));
  return trimmed;
}

void DiskCache::UnlinkSpares(const std::vector<Spare>& spares) {
  if (spares.empty()) return;
  uint64_t done = 0, failed = 0;
  for (const Spare& spare : spares) {
    if (::unlinkat(dir_->tier_fd(spare.tier), SpareFileName(spare.id).c_str(), 0) == 0 ||
        errno == ENOENT) {
      done += spare.bytes;
    } else {
      failed += spare.bytes;
      counters_->DiskError();
    }
  }
  MutexLock lock(mu_);
  deleting_bytes_ -= done + failed;
  leaked_bytes_ += failed;
}

bool DiskCache::Reserve(int tier, uint64_t need) {
  std::vector<Victim> victims;
  bool reserved = false;
  {
    MutexLock lock(mu_);
    uint64_t budget = DataBudgetLocked();
    if (need > budget) return false;
    EvictLocked(tier, need, budget, &victims);
    // Bytes being deleted count as free here as they do for eviction: their files are gone a
    // few system calls later (the disk holds them that much longer). Waiting for them instead
    // (a yield, up to eight times) put every insert that came while another one's victims were
    // being emptied in a loop of yields, and most then gave up: truncating a file waits for the
    // disk's discard of its blocks (a file system mounted with -o discard). Otherwise the room
    // left is held by others' writes still running: refused.
    if (FitsLocked(need, budget)) {
      tiers_[tier].writing_bytes += need;
      reserved = true;
      // Past the capacity on disk: forgotten entries' files go at full speed.
      if (!forgotten_.empty() && UsedLocked() > budget) forget_cv_.NotifyAll();
    }
  }
  Unlink(std::move(victims));
  return reserved;
}

bool DiskCache::Drop(int tier, uint64_t key, uint64_t id, bool unlink) {
  std::optional<Victim> v;  // declared before the lock: its file is released after it
  {
    MutexLock lock(mu_);
    TierState& ts = tiers_[tier];
    auto it = ts.index.find(key);
    if (it == ts.index.end() || it->second.id != id || it->second.pending) return false;
    ts.policy->Erase(key);
    v = RemoveLocked(tier, it, /*reusable=*/false);
    if (!unlink) return true;
    deleting_bytes_ += v->bytes;
  }
  Unlink({std::move(*v)});
  return true;
}

void DiskCache::Forget(Tier tier, const std::vector<BlockId>& blocks) {
  OpGuard guard(this);
  if (!guard) return;
  int t = TierIndex(tier);
  MutexLock lock(mu_);
  TierState& ts = tiers_[t];
  const bool idle = forgotten_.empty();
  for (const BlockId& b : blocks) {
    auto it = ts.index.find(b.key);
    if (it == ts.index.end()) continue;
    const Entry& e = it->second;
    if (e.pending || e.fid != b.fid || e.block_offset != b.block_offset) continue;
    ts.policy->Erase(b.key);
    forgotten_.push_back(RemoveLocked(t, it, /*reusable=*/true));
    deleting_bytes_ += forgotten_.back().bytes;
    counters_->Forgotten(tier);
  }
  if (idle && !forgotten_.empty()) forget_cv_.NotifyAll();
}

void DiskCache::ForgetLoop() {
  const auto pause = std::chrono::milliseconds(config_.forget_pause_ms);
  MutexLock lock(mu_);
  for (;;) {
    while (forgotten_.empty() && !forget_stop_) forget_cv_.Wait(lock);
    if (forgotten_.empty()) return;  // stopping, nothing left
    std::vector<Victim> batch;
    while (!forgotten_.empty() && batch.size() < kForgetBatch) {
      batch.push_back(std::move(forgotten_.front()));
      forgotten_.pop_front();
    }
    lock.Unlock();
    Unlink(std::move(batch));
    lock.Lock();
    // The next batch waits while the files on disk fit the capacity; an insert that needs
    // their room (it counted them as free) or Close cuts the wait short.
    if (pause.count() > 0 && !forgotten_.empty() && !forget_stop_ &&
        UsedLocked() <= DataBudgetLocked()) {
      forget_cv_.WaitFor(lock, pause);
    }
  }
}

void DiskCache::NoteWriteError(const absl::Status& status) {
  counters_->DiskError();
  int64_t until = NowNs() + int64_t{config_.backoff_ms} * 1000000;
  int64_t prev = backoff_until_ns_.exchange(until);
  if (prev < NowNs()) {  // log once per backoff period, not once per insert
    spdlog::warn("cache: disk write failed, skipping disk inserts for {} ms: {}",
                 config_.backoff_ms, status);
  }
}

size_t DiskCache::MaxOpenFiles() {
  static const size_t max = [] {
    rlimit rl{};
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return size_t{8192};
    return std::clamp<size_t>(static_cast<size_t>(rl.rlim_cur) / 4, 64, 8192);
  }();
  return max;
}

void DiskCache::KeepOpen(int tier, uint64_t key, uint64_t id, std::shared_ptr<OpenFile> file) {
  std::shared_ptr<OpenFile> closing;  // declared before the lock: closed after it
  MutexLock lock(mu_);
  auto it = tiers_[tier].index.find(key);
  if (it == tiers_[tier].index.end() || it->second.id != id || it->second.file) return;
  it->second.file = std::move(file);
  open_files_.push_back({tier, key, id});
  while (open_files_.size() > MaxOpenFiles()) {
    OpenFileSlot old = open_files_.front();
    open_files_.pop_front();
    auto o = tiers_[old.tier].index.find(old.key);
    if (o != tiers_[old.tier].index.end() && o->second.id == old.id) {
      closing = std::move(o->second.file);
      break;  // one in, one out: at most one close per call
    }
  }
}

bool DiskCache::Read(Tier tier, const BlockId& block, uint64_t offset, size_t len, char* dst) {
  OpGuard guard(this);
  if (!guard) return false;
  if (len == 0) return true;
  int t = TierIndex(tier);
  EntryRef ref;
  absl::InlinedVector<uint64_t, 16> sums;  // of the pages the read touches
  std::shared_ptr<OpenFile> file;
  {
    MutexLock lock(mu_);
    TierState& ts = tiers_[t];
    auto it = ts.index.find(block.key);
    if (it == ts.index.end()) return false;
    Entry& e = it->second;
    if (e.pending || e.fid != block.fid || e.block_offset != block.block_offset ||
        e.blob_size != block.blob_size || offset + len > e.data_len) {
      return false;
    }
    ref = EntryRef{block.fid, e.blob_size, e.block_offset, e.data_len, tier, e.id};
    sums.assign(e.page_sums.begin() + offset / format::kPageSize,
                e.page_sums.begin() + (offset + len - 1) / format::kPageSize + 1);
    file = e.file;
    if (offset != e.next_sequential) ts.policy->Touch(block.key);
    e.next_sequential = static_cast<uint32_t>(offset + len);
  }
  absl::Status s;
  bool opened = false;
  if (!file) {
    absl::StatusOr<int> fd = OpenEntryFile(dir_->tier_fd(tier), ref.id);
    if (fd.ok()) {
      file = std::make_shared<OpenFile>(*fd);
      opened = true;
    } else {
      s = fd.status();
    }
  }
  if (file) s = ReadEntryData(file->fd, ref, sums.data(), offset, len, dst);
  if (s.ok()) {
    if (opened) KeepOpen(t, block.key, ref.id, std::move(file));
    return true;
  }
  file.reset();
  // A Drop that finds the entry gone means it was evicted during the read: its file may be
  // gone, or written over by another block as a spare (which the checksums caught). A plain miss,
  // not counted.
  if (absl::IsNotFound(s)) {
    // Evicted since the lookup (then this is a no-op), or deleted behind our back.
    Drop(t, block.key, ref.id, /*unlink=*/false);
  } else if (absl::IsDataLoss(s)) {
    if (Drop(t, block.key, ref.id, /*unlink=*/true)) {
      counters_->ChecksumFailure(tier);
      spdlog::warn("cache: dropped corrupt entry {}/{} ({} @{}): {}", TierName(tier),
                   EntryFileName(ref.id), block.fid, block.block_offset, s);
    }
  } else if (Drop(t, block.key, ref.id, /*unlink=*/true)) {
    counters_->DiskError();
    spdlog::warn("cache: read of {}/{} failed: {}", TierName(tier), EntryFileName(ref.id), s);
  }
  return false;
}

bool DiskCache::Insert(Tier tier, const BlockId& block, std::string_view data) {
  OpGuard guard(this);
  if (!guard || NowNs() < backoff_until_ns_.load()) return false;
  if (block.fid.empty() || block.fid.size() > format::kMaxFidLen || data.empty()) return false;
  int t = TierIndex(tier);
  uint64_t need = RoundUp(EntryFileSize(block.fid.size(), data.size()), fs_block_);
  std::vector<uint64_t> sums = PageSums(data);
  uint64_t id;
  {
    MutexLock lock(mu_);
    TierState& ts = tiers_[t];
    if (ts.index.contains(block.key)) return false;  // cached, or another thread is writing it
    id = next_id_++;
    ts.index.emplace(block.key, Entry{std::string(block.fid),
                                      block.blob_size,
                                      block.block_offset,
                                      static_cast<uint32_t>(data.size()),
                                      id,
                                      0,
                                      true,
                                      {},
                                      nullptr});
  }
  auto unpublish = [&](uint64_t reserved) {
    MutexLock lock(mu_);
    tiers_[t].writing_bytes -= reserved;
    tiers_[t].index.erase(block.key);
  };
  if (!Reserve(t, need)) {
    unpublish(0);
    return false;
  }
  EntryRef ref{
      block.fid, block.blob_size, block.block_offset, static_cast<uint32_t>(data.size()), tier, id};
  std::optional<SpareFile> spare;
  std::shared_ptr<OpenFile> closing;  // declared before the lock: closed after it
  {
    MutexLock lock(mu_);
    if (spares_.empty() && !forgotten_.empty()) {
      // A deleted blob's entry the forget thread has not reached yet: written over under its
      // old name, as a spare would be (after a benchmark deleted 1 GiB, the next 1 GiB written
      // found no spare yet and created files, and the spares made behind it went over the
      // capacity and were deleted).
      Victim& v = forgotten_.front();
      if (v.reusable && (v.file == nullptr || v.file.use_count() == 1)) {
        spare = SpareFile{dir_->tier_fd(v.tier), v.id, /*entry_name=*/true};
        closing = std::move(v.file);
        deleting_bytes_ -= v.bytes;
        forgotten_.pop_front();
      }
    } else if (!spares_.empty()) {
      // One of the entry's own tier if there is one near the end (same size: written over
      // with nothing to cut or to add), else the last.
      auto it = spares_.end() - 1;
      for (auto s = spares_.rbegin(); s != spares_.rend() && s - spares_.rbegin() < 16; ++s) {
        if (s->tier == tier) {
          it = std::next(s).base();
          break;
        }
      }
      spare = SpareFile{dir_->tier_fd(it->tier), it->id};
      spare_bytes_ -= it->bytes;
      spares_.erase(it);
    }
  }
  closing.reset();
  absl::StatusOr<uint64_t> written =
      WriteEntryFile(dir_->tier_fd(tier), ref, sums, data, spare ? &*spare : nullptr);
  if (spare && spare->reused) counters_->FileReused();
  uint64_t dir_bytes = dir_->MeasureTierDir(tier);
  if (!written.ok()) {
    unpublish(need);
    NoteWriteError(written.status());
    return false;
  }
  std::vector<Victim> victims;
  std::vector<Spare> trimmed;
  {
    MutexLock lock(mu_);
    TierState& ts = tiers_[t];
    ts.writing_bytes -= need;
    ts.dir_bytes = dir_bytes;
    Entry& e = ts.index[block.key];  // still pending: only this thread publishes or drops it
    e.pending = false;
    e.disk_bytes = *written;
    e.page_sums = std::move(sums);
    ts.live_bytes += *written;
    ts.policy->Add(block.key, *written);
    // The file may have taken more than estimated, or the directory may have grown.
    EvictLocked(t, 0, DataBudgetLocked(), &victims);
    // Or the entry went into a smaller spare, or none while others were left.
    trimmed = TrimSparesLocked();
  }
  UnlinkSpares(trimmed);
  Unlink(std::move(victims));
  counters_->Inserted(tier, data.size());
  return true;
}

void DiskCache::Close() {
  if (closed_.exchange(true)) return;
  while (inflight_.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  {
    MutexLock lock(mu_);
    forget_stop_ = true;
  }
  forget_cv_.NotifyAll();
  if (forget_thread_.joinable()) forget_thread_.join();

  std::vector<Victim> victims;
  std::string encoded;
  uint64_t old_index = dir_->MeasureIndex();
  {
    MutexLock lock(mu_);
    // The old index is replaced, so the new one may use its room; no slack is needed any more.
    uint64_t fixed = root_meta_bytes_ - std::min(root_meta_bytes_, old_index);
    for (const TierState& t : tiers_) fixed += t.dir_bytes;
    while (true) {
      std::vector<IndexRecord> records;
      for (int t = 0; t < kNumTiers; ++t) {
        const TierState& ts = tiers_[t];
        for (const auto& [key, state] : ts.policy->Export()) {
          const Entry& e = ts.index.at(key);
          records.push_back(
              {EntryRef{e.fid, e.blob_size, e.block_offset, e.data_len, static_cast<Tier>(t), e.id},
               &e.page_sums, state});
        }
      }
      encoded = CacheDir::EncodeIndex(records, next_id_);
      uint64_t need = RoundUp(encoded.size(), fs_block_);
      uint64_t budget = config_.capacity_bytes > fixed ? config_.capacity_bytes - fixed : 0;
      if (FitsLocked(need, budget)) break;  // victims go before the write
      size_t before = victims.size();
      EvictLocked(kNumTiers - 1, need, budget, &victims);
      if (victims.size() == before) {
        encoded.clear();  // cannot fit: no index, the next open reads entry headers instead
        break;
      }
    }
  }
  Unlink(std::move(victims));
  std::vector<Spare> spares;
  {
    MutexLock lock(mu_);
    spares.swap(spares_);
    deleting_bytes_ += spare_bytes_;
    spare_bytes_ = 0;
  }
  UnlinkSpares(spares);
  if (!encoded.empty()) {
    if (absl::Status s = dir_->WriteIndex(encoded); !s.ok()) {
      spdlog::warn("cache: index not saved, the next open will scan entry headers: {}", s);
    }
  }
}

void DiskCache::FillStats(CacheStats* stats) const {
  MutexLock lock(mu_);
  stats->disk_enabled = true;
  stats->disk_capacity = config_.capacity_bytes;
  stats->disk_meta_bytes = root_meta_bytes_;
  stats->disk_spare_bytes = spare_bytes_;
  for (int t = 0; t < kNumTiers; ++t) {
    const TierState& ts = tiers_[t];
    stats->disk_meta_bytes += ts.dir_bytes;
    stats->tiers[t].entries = ts.policy->size();
    stats->tiers[t].bytes = ts.live_bytes;
    stats->tiers[t].share_bytes = GuaranteeLocked(t);
  }
}

}  // namespace kelp::mount::cache
