#include "volume/store/volume.h"

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <utility>

#include "shared/coding.h"
#include "shared/hash.h"
#include "shared/log.h"
#include "shared/metrics.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::volume {
namespace {

// Needles up to this size are encoded into one buffer and written with one pwrite; larger
// ones are written as header, data, footer so the data is not copied.
constexpr size_t kOneBufferMax = 256 << 10;
constexpr size_t kVerifyChunk = 1 << 20;
// Drop-behind: each time this many bytes were appended since the last step, they start going
// to the device, and the step before them, written by now, leaves the page cache. A volume
// taking a stream then cycles through a few steps' worth of pages instead of filling memory
// with fresh ones: on a VM that hands freed memory back to its host, touching a fresh page
// costs more than copying 4 KiB into it, and the needles' copies were 40 % of all CPU samples
// of a sequential write through a mount. Reads of needles this drops go to the device (the
// mounts' own caches keep what they read again).
constexpr uint64_t kWritebackStep = 8 << 20;

uint64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Counter* ChecksumFailureCounter() {
  static Counter* c = MetricsRegistry::Default().GetCounter(
      "kelp_volume_checksum_failures_total",
      "Needles whose checksum or header did not verify on read");
  return c;
}

Counter* SyncCounter() {
  static Counter* c = MetricsRegistry::Default().GetCounter(
      "kelp_volume_fdatasyncs_total",
      "fdatasync calls made for durable writes (shared by group commit)");
  return c;
}

absl::StatusOr<int> CopiesOf(std::string_view replication) {
  if (replication.size() != 3) {
    return absl::InvalidArgumentError(
        kelp::StrCat("bad replication \"", replication, "\": want three digits"));
  }
  int copies = 1;
  for (char c : replication) {
    if (c < '0' || c > '9') {
      return absl::InvalidArgumentError(
          kelp::StrCat("bad replication \"", replication, "\": want three digits"));
    }
    copies += c - '0';
  }
  return copies;
}

bool ValidCollection(std::string_view c) {
  if (c.size() > 128 || (!c.empty() && c[0] == '.')) return false;
  for (char ch : c) {
    bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '_' || ch == '-' || ch == '.';
    if (!ok) return false;
  }
  return true;
}

absl::Status NotFound(uint64_t key) {
  return PosixError(ENOENT, kelp::StrCat("needle ", key, " not found"));
}

// Volume::dat_path(): worked out once, as a local reader asks for it with every needle.
std::string DatPathFor(const Env& env, const std::string& base) {
  if (!env.real_files()) return "";
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(base + ".dat", ec);
  return ec ? "" : p.lexically_normal().string();
}

}  // namespace

Volume::Volume(Options options)
    : opts_(std::move(options)),
      base_(BasePath(opts_.dir, opts_.collection, opts_.id)),
      env_(opts_.env ? opts_.env : Env::Default()),
      dat_path_(DatPathFor(*env_, base_)),
      size_limit_(opts_.size_limit) {}

Volume::~Volume() = default;

std::string Volume::BasePath(const std::string& dir, const std::string& collection, uint32_t id) {
  return collection.empty() ? kelp::StrCat(dir, "/", id)
                            : kelp::StrCat(dir, "/", collection, "_", id);
}

absl::StatusOr<std::unique_ptr<Volume>> Volume::Create(Options options) {
  if (options.id == 0) return absl::InvalidArgumentError("volume id 0 is reserved");
  if (!ValidCollection(options.collection)) {
    return absl::InvalidArgumentError(
        kelp::StrCat("bad collection name \"", options.collection, "\""));
  }
  ASSIGN_OR_RETURN(int copies, CopiesOf(options.replication));
  std::unique_ptr<Volume> v(new Volume(std::move(options)));
  v->copies_ = copies;
  if (v->env_->Exists(v->base_ + ".dat")) {
    return PosixError(EEXIST,
                      kelp::StrCat("volume ", v->id(), " already exists at ", v->base_, ".dat"));
  }
  RETURN_IF_ERROR(v->CreateFiles());
  return v;
}

absl::StatusOr<std::unique_ptr<Volume>> Volume::Open(Options options) {
  if (options.id == 0) return absl::InvalidArgumentError("volume id 0 is reserved");
  std::unique_ptr<Volume> v(new Volume(std::move(options)));
  RETURN_IF_ERROR(v->Load());
  return v;
}

absl::Status Volume::CreateFiles() {
  RETURN_IF_ERROR(env_->CreateDir(opts_.dir));
  RETURN_IF_ERROR(env_->Remove(base_ + ".idx"));  // a stale index without its .dat
  ASSIGN_OR_RETURN(std::shared_ptr<File> dat, env_->Open(base_ + ".dat", true));
  MutexLock l(write_mu_);
  superblock_.replication = opts_.replication;
  replication_ = opts_.replication;
  std::string sb = EncodeSuperblock(superblock_);
  absl::Status s = WriteFully(*dat, 0, sb);
  if (s.ok()) s = dat->DataSync();
  if (!s.ok()) {
    (void)env_->Remove(base_ + ".dat");
    return s;
  }
  ASSIGN_OR_RETURN(std::shared_ptr<File> idx, env_->Open(base_ + ".idx", true));
  RETURN_IF_ERROR(env_->SyncDir(opts_.dir));
  {
    WriterLock m(map_mu_);
    dat_ = std::move(dat);
    idx_ = std::move(idx);
  }
  end_ = format::kSuperblockSize;
  idx_end_ = 0;
  ResetDropBehind();
  RecomputeStats();
  return absl::OkStatus();
}

void Volume::RecomputeStats() {
  uint64_t live = 0, live_bytes = 0, tombstones = 0, max_key = 0, map_bytes = 0;
  {
    ReaderLock m(map_mu_);
    map_.ForEach([&](uint64_t key, CompactMap::Value v) {
      max_key = std::max(max_key, key);
      if (v.deleted()) {
        ++tombstones;
      } else {
        ++live;
        live_bytes += format::NeedleLength(v.size);
      }
    });
    map_bytes = map_.MemoryBytes();
  }
  live_bytes_ = live_bytes;
  file_count_ = live;
  delete_count_ = tombstones;
  max_key_ = max_key;
  map_bytes_ = map_bytes;
  size_ = end_;
  garbage_ = end_ - format::kSuperblockSize - live_bytes;
}

absl::Status Volume::CheckWritable(uint64_t needle_len, bool is_delete) const {
  if (destroyed_) return PosixError(ENOENT, kelp::StrCat("volume ", id(), " was deleted"));
  if (broken_) {
    return PosixError(EIO, kelp::StrCat("volume ", id(), " is read-only after a failed fdatasync"));
  }
  if (ordered_read_only_) return PosixError(EROFS, kelp::StrCat("volume ", id(), " is read-only"));
  if (!is_delete && end_ >= size_limit_.load())
    return PosixError(EROFS, kelp::StrCat("volume ", id(), " is full"));
  if (end_ + needle_len > format::kMaxDatSize) {
    return PosixError(EROFS, kelp::StrCat("volume ", id(), " is full (format limit)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> Volume::CookieAt(const File& file, uint64_t offset) const {
  char h[format::kHeaderSize];
  RETURN_IF_ERROR(ReadFully(file, offset, sizeof h, h));
  return DecodeHeader(h).cookie;
}

absl::Status Volume::Append(std::string_view needle, std::string_view data_piece,
                            std::string_view tail, const IndexRecord& rec) {
  std::shared_ptr<File> dat;
  File* idx;
  {
    ReaderLock m(map_mu_);
    dat = dat_;
    idx = idx_.get();
  }
  const uint64_t off = end_;
  uint64_t len = needle.size() + data_piece.size() + tail.size();
  absl::Status s = WriteFully(*dat, off, needle);
  if (s.ok() && !data_piece.empty()) s = WriteFully(*dat, off + needle.size(), data_piece);
  if (s.ok() && !tail.empty()) s = WriteFully(*dat, off + needle.size() + data_piece.size(), tail);
  if (s.ok()) {
    char r[format::kIndexRecordSize];
    EncodeIndexRecord(rec, r);
    s = WriteFully(*idx, idx_end_, std::string_view(r, sizeof r));
    if (!s.ok()) {
      if (absl::Status t = idx->Truncate(idx_end_); !t.ok())
        spdlog::error("volume {}: {}", id(), t);
    }
  }
  if (!s.ok()) {
    // Whatever part of the needle reached the file goes again. Should that fail too, the
    // next append overwrites the bytes, and a restart cuts them as a torn tail.
    if (absl::Status t = dat->Truncate(off); !t.ok()) spdlog::error("volume {}: {}", id(), t);
    spdlog::warn("volume {}: append of needle {} failed, rolled back: {}", id(), rec.key, s);
    return s;
  }
  end_ = off + len;
  idx_end_ += format::kIndexRecordSize;
  DropBehind(dat);
  return absl::OkStatus();
}

void Volume::DropBehind(const std::shared_ptr<File>& dat) {
  if (wb_started_ > end_ || wb_dropped_ > wb_started_) ResetDropBehind();  // cut back by a failure
  if (end_ - wb_started_ < kWritebackStep) return;
  dat->StartWriteback(wb_started_, end_ - wb_started_);
  // Empty here: Write and Delete take it in the locked block that called Append.
  if (wb_started_ > wb_dropped_) drop_due_ = DueDrop{dat, wb_dropped_, wb_started_ - wb_dropped_};
  wb_dropped_ = wb_started_;
  wb_started_ = end_;
}

void Volume::RunDueDrop(std::optional<DueDrop> due) {
  if (due) due->dat->DropCached(due->offset, due->len);
}

absl::StatusOr<Volume::WriteResult> Volume::Write(uint64_t key, uint32_t cookie,
                                                  std::string_view data, bool sync) {
  if (data.size() > format::kMaxDataSize) {
    return PosixError(EFBIG, kelp::StrCat("needle of ", data.size(), " bytes is too large"));
  }
  WriteResult res{static_cast<uint32_t>(data.size()), Hash64(data)};
  const uint64_t len = format::NeedleLength(res.size);
  const uint64_t now = NowNs();
  // A needle read by range gets its block sums now, from the bytes being written: otherwise
  // its first ranged read would read it whole from the disk to take them (the written pages
  // are dropped from the page cache behind the writes).
  std::shared_ptr<BlockSums::Entry> sums;
  if (data.size() >= BlockSums::kMinNeedle) {
    sums = std::make_shared<BlockSums::Entry>();
    sums->header = NeedleHeader{cookie, key, res.size};
    sums->checksum = res.checksum;
    sums->append_time_ns = now;
    sums->blocks.reserve((data.size() + BlockSums::kBlockSize - 1) / BlockSums::kBlockSize);
    BlockSums::TakeSums(data, &sums->blocks);
  }
  std::string head, tail;
  std::string_view data_piece;
  if (data.size() <= kOneBufferMax) {
    head.reserve(len);
    EncodeNeedle(key, cookie, data, res.checksum, now, &head);
  } else {
    // Encode an empty needle to get header and footer, then fix the size field.
    std::string frame;
    EncodeNeedle(key, cookie, {}, res.checksum, now, &frame);
    EncodeFixed32LE(frame.data() + format::kSizeOffset, res.size);
    head = frame.substr(0, format::kHeaderSize);
    tail = frame.substr(format::kHeaderSize, format::kFooterSize);
    tail.resize(len - format::kHeaderSize - data.size(), '\0');
    data_piece = data;
  }
  uint64_t seq;
  std::optional<DueDrop> due;
  {
    MutexLock l(write_mu_);
    RETURN_IF_ERROR(CheckWritable(len, false));
    std::optional<CompactMap::Value> old;
    std::shared_ptr<File> dat;
    {
      ReaderLock m(map_mu_);
      old = map_.Get(key);
      if (old && !old->deleted()) dat = dat_;
    }
    if (dat) {
      ASSIGN_OR_RETURN(uint32_t old_cookie,
                       CookieAt(*dat, uint64_t{old->offset_units} * format::kAlignment));
      if (old_cookie != cookie) {
        return PosixError(EEXIST, kelp::StrCat("needle ", key, " exists with another cookie"));
      }
    }
    const uint64_t off = end_;
    IndexRecord rec{key, static_cast<uint32_t>(off / format::kAlignment), res.size};
    RETURN_IF_ERROR(Append(head, data_piece, tail, rec));
    {
      WriterLock m(map_mu_);
      map_.Set(key, CompactMap::Value{rec.offset_units, rec.size});
      map_bytes_ = map_.MemoryBytes();
      if (sums) {
        sums->file = dat_;
        sums->offset = off;
      }
    }
    if (sums) block_sums_.PutWritten(key, std::move(sums));
    if (old && !old->deleted()) {
      live_bytes_ -= format::NeedleLength(old->size);
    } else {
      file_count_.fetch_add(1);
    }
    live_bytes_ += len;
    if (key > max_key_.load()) max_key_ = key;
    size_ = end_;
    garbage_ = end_ - format::kSuperblockSize - live_bytes_;
    seq = appended_seq_.fetch_add(1) + 1;
    due = std::exchange(drop_due_, std::nullopt);
    if (!sync && end_ - sync_behind_at_ >= kSyncBehindBytes) {
      sync_behind_at_ = end_;
      res.sync_behind = true;
    }
  }
  RunDueDrop(std::move(due));
  if (sync) RETURN_IF_ERROR(WaitDurable(seq));
  return res;
}

absl::StatusOr<uint32_t> Volume::Delete(uint64_t key, uint32_t cookie, bool sync) {
  std::string needle;
  EncodeTombstone(key, cookie, NowNs(), &needle);
  uint64_t seq;
  uint32_t freed;
  std::optional<DueDrop> due;
  {
    MutexLock l(write_mu_);
    RETURN_IF_ERROR(CheckWritable(needle.size(), true));
    std::optional<CompactMap::Value> old;
    std::shared_ptr<File> dat;
    {
      ReaderLock m(map_mu_);
      old = map_.Get(key);
      dat = dat_;
    }
    if (!old || old->deleted()) return NotFound(key);
    ASSIGN_OR_RETURN(uint32_t old_cookie,
                     CookieAt(*dat, uint64_t{old->offset_units} * format::kAlignment));
    if (old_cookie != cookie) return NotFound(key);
    const uint64_t off = end_;
    IndexRecord rec{key, static_cast<uint32_t>(off / format::kAlignment), format::kTombstoneSize};
    RETURN_IF_ERROR(Append(needle, {}, {}, rec));
    {
      WriterLock m(map_mu_);
      map_.Delete(key, rec.offset_units);
    }
    freed = old->size;
    live_bytes_ -= format::NeedleLength(old->size);
    file_count_.fetch_sub(1);
    delete_count_.fetch_add(1);
    size_ = end_;
    garbage_ = end_ - format::kSuperblockSize - live_bytes_;
    seq = appended_seq_.fetch_add(1) + 1;
    due = std::exchange(drop_due_, std::nullopt);
  }
  RunDueDrop(std::move(due));
  if (sync) RETURN_IF_ERROR(WaitDurable(seq));
  return freed;
}

absl::Status Volume::Sync() { return WaitDurable(appended_seq_.load()); }

void Volume::SyncBehind() {
  if (sync_behind_running_.exchange(true)) return;
  (void)Sync();  // a failure is logged and makes the volume read-only (WaitDurable)
  sync_behind_running_ = false;
}

absl::Status Volume::WaitDurable(uint64_t seq) {
  MutexLock l(sync_mu_);
  while (durable_seq_ < seq) {
    if (broken_)
      return PosixError(EIO, kelp::StrCat("volume ", id(), ": an earlier fdatasync failed"));
    if (sync_running_) {
      sync_cv_.Wait(l);
      continue;
    }
    // Become the leader: sync for every append made so far, ours and other waiters'.
    sync_running_ = true;
    uint64_t target = appended_seq_.load();
    l.Unlock();
    std::shared_ptr<File> dat;
    {
      ReaderLock m(map_mu_);
      dat = dat_;
    }
    absl::Status s = dat->DataSync();
    SyncCounter()->Inc();
    l.Lock();
    sync_running_ = false;
    sync_cv_.NotifyAll();
    if (!s.ok()) {
      // After a failed fdatasync the kernel may have dropped the dirty pages: a retry could
      // "succeed" without the data. Nothing written here is trusted as durable any more.
      broken_ = true;
      spdlog::error("volume {}: {}; the volume is now read-only", id(), s);
      return s;
    }
    durable_seq_ = std::max(durable_seq_, target);
  }
  return absl::OkStatus();
}

std::optional<Volume::Handle> Volume::Find(uint64_t key) const {
  ReaderLock m(map_mu_);
  auto v = map_.Get(key);
  if (!v || v->deleted()) return std::nullopt;
  return Handle{dat_, uint64_t{v->offset_units} * format::kAlignment, v->size, key};
}

std::optional<uint32_t> Volume::SizeOf(uint64_t key) const {
  ReaderLock m(map_mu_);
  auto v = map_.Get(key);
  if (!v || v->deleted()) return std::nullopt;
  return v->size;
}

absl::StatusOr<Volume::Handle> Volume::FindChecked(uint64_t key, uint32_t cookie) const {
  std::optional<Handle> h = Find(key);
  if (!h) return NotFound(key);
  char head[format::kHeaderSize];
  absl::Status s = ReadFully(*h->file, h->offset, sizeof head, head);
  if (!s.ok()) return s.code() == absl::StatusCode::kDataLoss ? ChecksumFailure(s, key) : s;
  NeedleHeader n = DecodeHeader(head);
  if (n.key != key || n.size != h->size) {
    return ChecksumFailure(absl::DataLossError("index and needle header disagree"), key);
  }
  if (n.cookie != cookie) return NotFound(key);
  return *h;
}

absl::StatusOr<uint32_t> Volume::Stat(uint64_t key, uint32_t cookie) const {
  ASSIGN_OR_RETURN(Handle h, FindChecked(key, cookie));
  return h.size;
}

absl::StatusOr<std::vector<Volume::Listed>> Volume::List(uint64_t after_key, size_t limit,
                                                         bool* more) const {
  std::vector<Listed> out;
  *more = false;
  {
    // One pass over the map (it has no seek): cheap next to the header reads below.
    ReaderLock m(map_mu_);
    map_.ForEach([&](uint64_t key, CompactMap::Value v) {
      if (key <= after_key || v.deleted() || *more) return;
      if (out.size() == limit) {
        *more = true;
        return;
      }
      out.push_back(Listed{key, 0, v.size});
    });
  }
  std::vector<Listed> live;
  live.reserve(out.size());
  for (Listed& l : out) {
    // Found again: a vacuum may have moved it, a delete removed it.
    std::optional<Handle> h = Find(l.key);
    if (!h) continue;
    auto cookie = CookieAt(*h->file, h->offset);
    if (!cookie.ok()) return cookie.status();
    l.cookie = *cookie;
    l.size = h->size;
    live.push_back(l);
  }
  return live;
}

absl::Status Volume::ChecksumFailure(const absl::Status& s, uint64_t key) const {
  checksum_failures_.fetch_add(1);
  ChecksumFailureCounter()->Inc();
  spdlog::error("volume {}: needle {} is corrupt: {}", id(), key, s);
  return absl::DataLossError(
      kelp::StrCat("volume ", id(), ": needle ", key, " is corrupt: ", ToStd(s.message())));
}

absl::StatusOr<DecodedNeedle> Volume::Read(uint64_t key, uint32_t cookie, std::string* buf) const {
  std::optional<Handle> h = Find(key);
  if (!h) return NotFound(key);
  return Read(*h, cookie, buf);
}

absl::StatusOr<DecodedNeedle> Volume::Read(const Handle& h, uint32_t cookie,
                                           std::string* buf) const {
  const uint64_t key = h.key;
  const uint64_t len = format::NeedleLength(h.size);
  buf->resize(len);
  absl::Status s = ReadFully(*h.file, h.offset, len, buf->data());
  if (!s.ok()) return s.code() == absl::StatusCode::kDataLoss ? ChecksumFailure(s, key) : s;
  auto n = DecodeNeedle(*buf);
  if (!n.ok()) return ChecksumFailure(n.status(), key);
  if (n->header.key != key || n->header.size != h.size) {
    return ChecksumFailure(
        absl::DataLossError(kelp::StrCat("index points at needle ", n->header.key, " of ",
                                         n->header.size, " bytes")),
        key);
  }
  if (n->header.cookie != cookie) return NotFound(key);
  return n;
}

absl::StatusOr<DecodedNeedle> Volume::Verify(const Handle& h, uint32_t cookie) const {
  return VerifyWhole(h, cookie, nullptr);
}

absl::StatusOr<DecodedNeedle> Volume::VerifyWhole(const Handle& h, uint32_t cookie,
                                                  std::vector<uint64_t>* blocks) const {
  char head[format::kHeaderSize];
  absl::Status s = ReadFully(*h.file, h.offset, sizeof head, head);
  if (!s.ok()) return s.code() == absl::StatusCode::kDataLoss ? ChecksumFailure(s, h.key) : s;
  DecodedNeedle n;
  n.header = DecodeHeader(head);
  if (n.header.key != h.key || n.header.size != h.size) {
    return ChecksumFailure(absl::DataLossError("index and needle header disagree"), h.key);
  }
  if (n.header.cookie != cookie) return NotFound(h.key);
  static_assert(kVerifyChunk % BlockSums::kBlockSize == 0);
  Hasher hasher;
  std::string buf(std::min<size_t>(kVerifyChunk, h.size), '\0');
  for (uint64_t done = 0; done < h.size;) {
    size_t n_read = std::min<uint64_t>(buf.size(), h.size - done);
    s = ReadFully(*h.file, h.data_offset() + done, n_read, buf.data());
    if (!s.ok()) return s.code() == absl::StatusCode::kDataLoss ? ChecksumFailure(s, h.key) : s;
    hasher.Update(buf.data(), n_read);
    if (blocks != nullptr) BlockSums::TakeSums(std::string_view(buf.data(), n_read), blocks);
    done += n_read;
  }
  char footer[format::kFooterSize];
  s = ReadFully(*h.file, h.data_offset() + h.size, sizeof footer, footer);
  if (!s.ok()) return s.code() == absl::StatusCode::kDataLoss ? ChecksumFailure(s, h.key) : s;
  n.checksum = DecodeFixed64LE(footer);
  n.append_time_ns = DecodeFixed64LE(footer + 8);
  if (hasher.Digest() != n.checksum)
    return ChecksumFailure(absl::DataLossError("checksum mismatch"), h.key);
  return n;
}

absl::StatusOr<DecodedNeedle> Volume::ReadRange(const Handle& h, uint32_t cookie, uint64_t offset, uint64_t len,
                                                std::string* buf) const {
  if (offset > h.size || len > h.size - offset) {
    return absl::OutOfRangeError(kelp::StrCat("bytes ", offset, "+", len, " of a ", h.size, "-byte needle"));
  }
  std::shared_ptr<const BlockSums::Entry> sums = block_sums_.Find(h.key, h.file.get(), h.offset);
  if (sums == nullptr) {
    auto e = std::make_shared<BlockSums::Entry>();
    auto whole = VerifyWhole(h, cookie, &e->blocks);
    if (!whole.ok()) return whole.status();
    e->file = h.file;
    e->offset = h.offset;
    e->header = whole->header;
    e->checksum = whole->checksum;
    e->append_time_ns = whole->append_time_ns;
    block_sums_.Put(h.key, e);
    sums = std::move(e);
  }
  if (sums->header.cookie != cookie) return NotFound(h.key);
  constexpr uint64_t kBlock = BlockSums::kBlockSize;
  const uint64_t start = offset / kBlock * kBlock;
  const uint64_t end = std::min<uint64_t>(h.size, (offset + len + kBlock - 1) / kBlock * kBlock);
  buf->resize(end - start);
  absl::Status s = ReadFully(*h.file, h.data_offset() + start, end - start, buf->data());
  if (!s.ok()) return s.code() == absl::StatusCode::kDataLoss ? ChecksumFailure(s, h.key) : s;
  for (uint64_t b = start; b < end; b += kBlock) {
    std::string_view block = std::string_view(*buf).substr(b - start, std::min(kBlock, end - b));
    if (Hash64(block) != sums->blocks[b / kBlock]) {
      block_sums_.Erase(h.key);
      return ChecksumFailure(absl::DataLossError(kelp::StrCat("checksum mismatch in the block at ", b)), h.key);
    }
  }
  DecodedNeedle n;
  n.header = sums->header;
  n.checksum = sums->checksum;
  n.append_time_ns = sums->append_time_ns;
  n.data = std::string_view(*buf).substr(offset - start, len);
  return n;
}

Volume::Stats Volume::GetStats() const {
  Stats s;
  s.size = size_.load();
  s.file_count = file_count_.load();
  s.delete_count = delete_count_.load();
  s.deleted_bytes = garbage_.load();
  s.max_key = max_key_.load();
  s.read_only = read_only();
  s.map_bytes = map_bytes_.load();
  return s;
}

double Volume::GarbageRatio() const {
  uint64_t size = size_.load();
  return size == 0 ? 0.0 : static_cast<double>(garbage_.load()) / static_cast<double>(size);
}

bool Volume::read_only() const {
  return ordered_read_only_.load() || broken_.load() || size_.load() >= size_limit_.load();
}

void Volume::SetReadOnly(bool read_only) { ordered_read_only_ = read_only; }

void Volume::SetSizeLimit(uint64_t bytes) { size_limit_ = bytes; }

absl::Status Volume::Destroy() {
  MutexLock c(compact_mu_);
  MutexLock l(write_mu_);
  destroyed_ = true;
  ordered_read_only_ = true;
  for (const char* ext : {".dat", ".idx", ".cpd", ".cpx"})
    RETURN_IF_ERROR(env_->Remove(base_ + ext));
  return env_->SyncDir(opts_.dir);
}

}  // namespace kelp::volume
