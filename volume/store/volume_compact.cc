// Vacuum: rewrite a volume without its garbage while reads and writes go on.
//
//  1. Under write_mu_ (briefly): snapshot the live entries and the .dat end.
//  2. No lock: copy the live needles, in file order, into <base>.cpd / <base>.cpx.
//  3. No lock: carry over what was appended to the old .dat since the snapshot (new needles,
//     overwrites, tombstones), reading the old file in order; sync the new .dat.
//  4. Under write_mu_: carry over the last few appends, sync, rename the new files over the
//     old ones, and swap files and map under map_mu_ in one step.
// Readers never wait for 2-3 and see either the old (file, offset) pair or the new one.
#include <algorithm>
#include <cerrno>

#include "shared/log.h"
#include "shared/progress.h"
#include "shared/status.h"
#include "shared/strings.h"
#include "volume/store/dat_scanner.h"
#include "volume/store/volume.h"

namespace kelp::volume {
namespace {

constexpr size_t kFlushBytes = 1 << 20;

// Buffered appender for the new files.
class CompactWriter {
 public:
  CompactWriter(std::shared_ptr<File> dat, std::shared_ptr<File> idx)
      : dat_(std::move(dat)), idx_(std::move(idx)) {}

  absl::Status Start(const Superblock& sb) {
    dat_buf_ = EncodeSuperblock(sb);
    return absl::OkStatus();
  }

  // Appends a verified needle (raw bytes, padding included) and indexes it.
  absl::Status Add(std::string_view raw, const NeedleHeader& h) {
    uint64_t off = dat_end_ + dat_buf_.size();
    IndexRecord r{h.key, static_cast<uint32_t>(off / format::kAlignment), h.size};
    dat_buf_.append(raw);
    char rec[format::kIndexRecordSize];
    EncodeIndexRecord(r, rec);
    idx_buf_.append(rec, sizeof rec);
    if (r.tombstone()) {
      map_.Delete(r.key, r.offset_units);
    } else {
      map_.Set(r.key, CompactMap::Value{r.offset_units, r.size});
    }
    if (dat_buf_.size() >= kFlushBytes) return Flush();
    return absl::OkStatus();
  }

  absl::Status Flush() {
    RETURN_IF_ERROR(WriteFully(*dat_, dat_end_, dat_buf_));
    dat_end_ += dat_buf_.size();
    dat_buf_.clear();
    RETURN_IF_ERROR(WriteFully(*idx_, idx_end_, idx_buf_));
    idx_end_ += idx_buf_.size();
    idx_buf_.clear();
    return absl::OkStatus();
  }

  absl::Status Sync() {
    RETURN_IF_ERROR(Flush());
    RETURN_IF_ERROR(dat_->DataSync());
    return idx_->DataSync();
  }

  uint64_t dat_end() const { return dat_end_ + dat_buf_.size(); }
  uint64_t idx_end() const { return idx_end_ + idx_buf_.size(); }
  CompactMap& map() { return map_; }
  const std::shared_ptr<File>& dat() const { return dat_; }
  const std::shared_ptr<File>& idx() const { return idx_; }

 private:
  std::shared_ptr<File> dat_, idx_;
  uint64_t dat_end_ = 0, idx_end_ = 0;
  std::string dat_buf_, idx_buf_;
  CompactMap map_;
};

// Copies every needle of old_dat in [*from, to) into w, in order.
absl::Status CatchUp(uint32_t vid, const File& old_dat, uint64_t* from, uint64_t to,
                     CompactWriter* w) {
  if (*from >= to) return absl::OkStatus();
  DatScanner scanner(old_dat, *from, to);
  for (;;) {
    switch (scanner.Next()) {
      case DatScanner::Step::kNeedle:
        RETURN_IF_ERROR(w->Add(scanner.raw(), scanner.needle().header));
        break;
      case DatScanner::Step::kEnd:
        *from = to;
        return absl::OkStatus();
      case DatScanner::Step::kCorrupt:
        spdlog::error("volume {}: vacuum: corrupt needle at {} not carried over", vid,
                      scanner.offset());
        break;
      case DatScanner::Step::kTorn:
        // Appends are whole before end_ moves past them, so this is real damage.
        return absl::DataLossError(kelp::StrCat("volume ", vid, ": vacuum found a torn needle at ",
                                                scanner.offset(), " below the end of the .dat"));
      case DatScanner::Step::kError:
        return scanner.status();
    }
  }
}

}  // namespace

absl::StatusOr<Volume::CompactResult> Volume::Compact(const CompactHooks* hooks) {
  std::unique_lock compacting(compact_mu_, std::try_to_lock);
  if (!compacting.owns_lock()) {
    return absl::UnavailableError(kelp::StrCat("volume ", id(), ": a vacuum is already running"));
  }
  // 1. Snapshot.
  struct Live {
    uint64_t offset;
    uint64_t key;
    uint32_t size;
  };
  std::vector<Live> live;
  uint64_t snap_end;
  std::shared_ptr<File> old_dat;
  Superblock sb;
  CompactResult result;
  {
    MutexLock l(write_mu_);
    if (destroyed_) return PosixError(ENOENT, kelp::StrCat("volume ", id(), " was deleted"));
    if (broken_) return PosixError(EIO, kelp::StrCat("volume ", id(), " is broken"));
    ReaderLock m(map_mu_);
    live.reserve(file_count_.load());
    map_.ForEach([&](uint64_t key, CompactMap::Value v) {
      if (!v.deleted())
        live.push_back(Live{uint64_t{v.offset_units} * format::kAlignment, key, v.size});
    });
    snap_end = end_;
    old_dat = dat_;
    sb = superblock_;
    result.size_before = end_;
  }
  std::sort(live.begin(), live.end(),
            [](const Live& a, const Live& b) { return a.offset < b.offset; });
  ++sb.compaction_revision;

  const std::string cpd = base_ + ".cpd", cpx = base_ + ".cpx";
  auto cleanup = [&] {
    (void)env_->Remove(cpx);
    (void)env_->Remove(cpd);
  };
  auto fail = [&](const absl::Status& s) {
    cleanup();
    spdlog::error("volume {}: vacuum failed: {}", id(), s);
    return s;
  };
  cleanup();
  // .cpd before .cpx: recovery relies on the order (docs/needle-format.md).
  auto new_dat = env_->Open(cpd, true);
  if (!new_dat.ok()) return fail(new_dat.status());
  auto new_idx = env_->Open(cpx, true);
  if (!new_idx.ok()) return fail(new_idx.status());
  CompactWriter w(*new_dat, *new_idx);
  (void)w.Start(sb);

  // 2. Copy the live needles, logging progress every 5 s of a long vacuum.
  uint64_t to_copy = 0, copied = 0;
  for (const Live& e : live) to_copy += format::NeedleLength(e.size);
  Progress progress([this](std::string_view line) { spdlog::info("volume {}: {}", id(), line); },
                    std::chrono::seconds(5));
  std::string buf;
  for (const Live& e : live) {
    buf.resize(format::NeedleLength(e.size));
    copied += buf.size();
    progress.Tick("vacuum copying live needles", copied, to_copy, "bytes");
    absl::Status s = ReadFully(*old_dat, e.offset, buf.size(), buf.data());
    if (!s.ok()) return fail(s);
    auto n = DecodeNeedle(buf);
    if (!n.ok() || n->header.key != e.key || n->header.size != e.size) {
      (void)ChecksumFailure(n.ok() ? absl::DataLossError("index and needle disagree") : n.status(),
                            e.key);
      continue;  // a corrupt needle can never be served; vacuum drops it
    }
    if (absl::Status s = w.Add(buf, n->header); !s.ok()) return fail(s);
  }
  if (hooks && hooks->after_copy) hooks->after_copy();

  // 3. Catch up without blocking writers, then make the bulk durable.
  uint64_t caught = snap_end;
  uint64_t now_end;
  {
    MutexLock l(write_mu_);
    now_end = end_;
  }
  if (absl::Status s = CatchUp(id(), *old_dat, &caught, now_end, &w); !s.ok()) return fail(s);
  if (absl::Status s = w.Sync(); !s.ok()) return fail(s);
  if (hooks && hooks->after_catchup) hooks->after_catchup();

  // 4. The switch.
  MutexLock l(write_mu_);
  if (destroyed_) return fail(PosixError(ENOENT, kelp::StrCat("volume ", id(), " was deleted")));
  if (absl::Status s = CatchUp(id(), *old_dat, &caught, end_, &w); !s.ok()) return fail(s);
  if (absl::Status s = w.Sync(); !s.ok()) return fail(s);
  if (absl::Status s = env_->Rename(cpd, base_ + ".dat"); !s.ok()) return fail(s);
  // From here on the new .dat is in place: the switch must happen even if a step fails
  // (recovery installs a left-over .cpx).
  if (absl::Status s = env_->Rename(cpx, base_ + ".idx"); !s.ok())
    spdlog::error("volume {}: {}", id(), s);
  if (absl::Status s = env_->SyncDir(opts_.dir); !s.ok()) spdlog::error("volume {}: {}", id(), s);
  {
    WriterLock m(map_mu_);
    map_ = std::move(w.map());
    dat_ = w.dat();
    idx_ = w.idx();
  }
  superblock_ = sb;
  end_ = w.dat_end();
  idx_end_ = w.idx_end();
  ResetDropBehind();
  RecomputeStats();
  {
    // Everything appended so far is in the new, synced .dat.
    MutexLock s(sync_mu_);
    durable_seq_ = std::max(durable_seq_, appended_seq_.load());
  }
  result.size_after = end_;
  spdlog::info("volume {}: vacuumed {} -> {} bytes", id(), result.size_before, result.size_after);
  return result;
}

}  // namespace kelp::volume
