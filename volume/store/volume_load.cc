// Volume start-up: opening the files and recovering from a crash. The rules are spelled out
// in docs/needle-format.md ("Recovery at start-up").
#include <cerrno>

#include "shared/log.h"
#include "shared/status.h"
#include "shared/strings.h"
#include "volume/store/dat_scanner.h"
#include "volume/store/volume.h"

namespace kelp::volume {
namespace {
constexpr size_t kIndexChunk = (1 << 20) / format::kIndexRecordSize * format::kIndexRecordSize;
}  // namespace

void Volume::RecoverCompactionFiles() {
  const std::string cpd = base_ + ".cpd", cpx = base_ + ".cpx";
  if (env_->Exists(cpd)) {
    spdlog::warn("volume {}: removing the files of an unfinished vacuum", id());
    (void)env_->Remove(cpd);
    (void)env_->Remove(cpx);
  } else if (env_->Exists(cpx)) {
    spdlog::warn("volume {}: finishing an interrupted vacuum (installing its index)", id());
    if (absl::Status s = env_->Rename(cpx, base_ + ".idx"); !s.ok())
      spdlog::error("volume {}: {}", id(), s);
  }
}

absl::Status Volume::Load() {
  RecoverCompactionFiles();
  MutexLock l(write_mu_);
  ASSIGN_OR_RETURN(std::shared_ptr<File> dat, env_->Open(base_ + ".dat", false));
  ASSIGN_OR_RETURN(uint64_t dat_size, dat->Size());
  if (dat_size < format::kSuperblockSize) {
    // Creation syncs the superblock before anything else, so this is a file whose creation
    // never finished: nothing can have been stored in it.
    spdlog::warn("volume {}: .dat shorter than its superblock; reinitialising it", id());
    superblock_.replication = opts_.replication;
    RETURN_IF_ERROR(dat->Truncate(0));
    RETURN_IF_ERROR(WriteFully(*dat, 0, EncodeSuperblock(superblock_)));
    dat_size = format::kSuperblockSize;
  } else {
    char sb[format::kSuperblockSize];
    RETURN_IF_ERROR(ReadFully(*dat, 0, sizeof sb, sb));
    auto decoded = DecodeSuperblock(std::string_view(sb, sizeof sb));
    if (!decoded.ok()) {
      return absl::DataLossError(kelp::StrCat(base_, ".dat: ", ToStd(decoded.status().message())));
    }
    superblock_ = *decoded;
  }
  replication_ = superblock_.replication;
  copies_ = 1;
  for (char ch : replication_) copies_ += ch - '0';
  ASSIGN_OR_RETURN(std::shared_ptr<File> idx, env_->Open(base_ + ".idx", true));
  {
    WriterLock m(map_mu_);
    dat_ = std::move(dat);
    idx_ = std::move(idx);
  }
  uint64_t indexed_end = format::kSuperblockSize;
  RETURN_IF_ERROR(LoadIndex(dat_size, &indexed_end));
  RETURN_IF_ERROR(ScanTail(indexed_end, dat_size));
  RecomputeStats();
  // What an earlier process appended may still sit in the page cache (it was killed, it
  // did not sync): count it as one append, so the first Sync() here fdatasyncs.
  appended_seq_.fetch_add(1);
  spdlog::info("volume {}: loaded {} needles ({} bytes, {} garbage)", id(), file_count_.load(),
               end_, garbage_.load());
  return absl::OkStatus();
}

absl::Status Volume::LoadIndex(uint64_t dat_size, uint64_t* indexed_end) {
  std::shared_ptr<File> dat, idx;
  {
    ReaderLock m(map_mu_);
    dat = dat_;
    idx = idx_;
  }
  ASSIGN_OR_RETURN(uint64_t idx_size, idx->Size());
  uint64_t whole = idx_size / format::kIndexRecordSize * format::kIndexRecordSize;
  if (whole != idx_size) {
    spdlog::warn("volume {}: cutting a torn record off the .idx", id());
    RETURN_IF_ERROR(idx->Truncate(whole));
  }
  uint64_t prev_end = format::kSuperblockSize;
  uint64_t good = 0;  // bytes of valid records
  std::optional<IndexRecord> last;
  std::string buf;
  WriterLock m(map_mu_);
  bool stop = false;
  for (uint64_t pos = 0; pos < whole && !stop; pos += buf.size()) {
    buf.resize(std::min<uint64_t>(kIndexChunk, whole - pos));
    RETURN_IF_ERROR(ReadFully(*idx, pos, buf.size(), buf.data()));
    for (size_t i = 0; i < buf.size(); i += format::kIndexRecordSize) {
      IndexRecord r = DecodeIndexRecord(buf.data() + i);
      bool bad = r.offset() < prev_end || r.end() > dat_size ||
                 (!r.tombstone() && r.size > format::kMaxDataSize);
      if (bad) {
        spdlog::warn("volume {}: .idx record {} does not fit the .dat; cutting the index there",
                     id(), (pos + i) / format::kIndexRecordSize);
        stop = true;
        break;
      }
      if (r.tombstone()) {
        map_.Delete(r.key, r.offset_units);
      } else {
        map_.Set(r.key, CompactMap::Value{r.offset_units, r.size});
      }
      prev_end = r.end();
      good = pos + i + format::kIndexRecordSize;
      last = r;
    }
  }
  if (good != whole) RETURN_IF_ERROR(idx->Truncate(good));
  if (last) {
    // The needle behind the last record must be the one it names; if not, the index belongs
    // to another .dat (say, an interrupted vacuum) and is rebuilt.
    std::string needle(format::NeedleLength(last->size), '\0');
    absl::Status s = ReadFully(*dat, last->offset(), needle.size(), needle.data());
    auto n = s.ok() ? DecodeNeedle(needle) : absl::StatusOr<DecodedNeedle>(s);
    if (!n.ok() || n->header.key != last->key || n->header.size != last->size) {
      spdlog::warn("volume {}: .idx does not match .dat; rebuilding it from .dat", id());
      map_ = CompactMap();
      RETURN_IF_ERROR(idx->Truncate(0));
      good = 0;
      prev_end = format::kSuperblockSize;
    }
  }
  idx_end_ = good;
  *indexed_end = prev_end;
  return absl::OkStatus();
}

absl::Status Volume::ScanTail(uint64_t from, uint64_t dat_size) {
  std::shared_ptr<File> dat, idx;
  {
    ReaderLock m(map_mu_);
    dat = dat_;
    idx = idx_;
  }
  DatScanner scanner(*dat, from, dat_size);
  std::string records;
  uint64_t added = 0, end = dat_size;
  auto flush = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_) -> absl::Status {
    RETURN_IF_ERROR(WriteFully(*idx, idx_end_, records));
    idx_end_ += records.size();
    records.clear();
    return absl::OkStatus();
  };
  for (bool done = false; !done;) {
    switch (scanner.Next()) {
      case DatScanner::Step::kNeedle: {
        const DecodedNeedle& n = scanner.needle();
        IndexRecord r{n.header.key, static_cast<uint32_t>(scanner.offset() / format::kAlignment),
                      n.header.size};
        {
          WriterLock m(map_mu_);
          if (r.tombstone()) {
            map_.Delete(r.key, r.offset_units);
          } else {
            map_.Set(r.key, CompactMap::Value{r.offset_units, r.size});
          }
        }
        char rec[format::kIndexRecordSize];
        EncodeIndexRecord(r, rec);
        records.append(rec, sizeof rec);
        ++added;
        if (records.size() >= kIndexChunk) RETURN_IF_ERROR(flush());
        break;
      }
      case DatScanner::Step::kCorrupt:
        checksum_failures_.fetch_add(1);
        spdlog::error("volume {}: corrupt needle at offset {} of the .dat; skipped", id(),
                      scanner.offset());
        break;
      case DatScanner::Step::kEnd:
        done = true;
        break;
      case DatScanner::Step::kTorn:
        end = scanner.offset();
        spdlog::warn("volume {}: torn tail at offset {}: cutting {} bytes off the .dat", id(), end,
                     dat_size - end);
        RETURN_IF_ERROR(dat->Truncate(end));
        done = true;
        break;
      case DatScanner::Step::kError:
        return scanner.status();
    }
  }
  RETURN_IF_ERROR(flush());
  if (added > 0) spdlog::info("volume {}: indexed {} needles the .idx lacked", id(), added);
  end_ = end;
  ResetDropBehind();
  return absl::OkStatus();
}

}  // namespace kelp::volume
