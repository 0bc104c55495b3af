// Journaled chunks: bytes a commit carries itself (an fsync of small writes), kept in the J
// family with the metadata, read back through GetChunks, trimmed and dropped with the file,
// and moved to blobs in the background with their seqs unchanged.
#include <atomic>
#include <map>
#include <set>
#include <thread>

#include "filer/client/chunk_intervals.h"
#include "filer/client/limits.h"
#include "filer/core/test_util.h"
#include "filer/store/keys.h"
#include "shared/mutex.h"
#include "volume/client/blob_store.h"

using namespace kelp::filer;
using namespace kelp::filer::testing;
using namespace std::chrono_literals;

namespace {

// In-memory blobs, all in volume 1; counts Puts, syncs and discards, and which blobs a
// sync (or a synced Put) made durable.
class MemBlobs : public kelp::volume::BlobStore {
 public:
  absl::StatusOr<std::string> Put(std::string_view data, bool fsync) override {
    kelp::MutexLock lock(mu_);
    if (fail) return kelp::PosixError(EIO, "volume server down");
    std::string fid =
        bad_fid ? "not a fid " + std::to_string(blobs_.size()) : Fid(1000 + blobs_.size());
    blobs_[fid] = std::string(data);
    fsyncs_ += fsync ? 1 : 0;
    if (fsync) durable_.insert(fid);
    return fid;
  }
  absl::Status Get(std::string_view fid, uint64_t offset, uint64_t length,
                   const kelp::volume::ByteSink& sink) override {
    std::string bytes;
    {
      kelp::MutexLock lock(mu_);
      auto it = blobs_.find(std::string(fid));
      if (it == blobs_.end()) return kelp::PosixError(EIO, "no such blob");
      if (offset + length > it->second.size()) return kelp::PosixError(EIO, "past the blob's end");
      bytes = it->second.substr(offset, length);
    }
    return sink(bytes);
  }
  absl::Status SyncVolumes(const std::vector<uint32_t>& volume_ids) override {
    kelp::MutexLock lock(mu_);
    if (fail_sync) return kelp::PosixError(EIO, "volume server down");
    ++syncs_;
    for (uint32_t v : volume_ids) {
      if (v != 1) continue;
      for (const auto& [fid, data] : blobs_) durable_.insert(fid);
    }
    return absl::OkStatus();
  }
  void Discard(const std::vector<std::string>& fids) override {
    kelp::MutexLock lock(mu_);
    for (const auto& fid : fids) {
      blobs_.erase(fid);
      ++discards_;
    }
  }

  size_t puts() {
    kelp::MutexLock lock(mu_);
    return blobs_.size() + discards_;
  }
  size_t fsyncs() {
    kelp::MutexLock lock(mu_);
    return fsyncs_;
  }
  size_t syncs() {
    kelp::MutexLock lock(mu_);
    return syncs_;
  }
  size_t discards() {
    kelp::MutexLock lock(mu_);
    return discards_;
  }
  bool durable(const std::string& fid) {
    kelp::MutexLock lock(mu_);
    return durable_.count(fid) > 0;
  }
  bool fail = false;
  bool fail_sync = false;
  bool bad_fid = false;  // Put names its blobs with something no volume id can be read from

 private:
  kelp::Mutex mu_;
  std::map<std::string, std::string> blobs_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> durable_ ABSL_GUARDED_BY(mu_);
  size_t fsyncs_ ABSL_GUARDED_BY(mu_) = 0;
  size_t syncs_ ABSL_GUARDED_BY(mu_) = 0;
  size_t discards_ ABSL_GUARDED_BY(mu_) = 0;
};

Chunk Journaled(uint64_t offset, const std::string& data) {
  Chunk c;
  c.set_offset(offset);
  c.set_size(data.size());
  c.set_data(data);
  return c;
}

// The file's bytes as GetChunks describes them, journaled chunks from their data, blobs from
// blobs ('?' for blob bytes when blobs is null).
std::string Content(Harness& h, uint64_t ino, MemBlobs* blobs) {
  auto g = h.fs->GetChunks(ino);
  REQUIRE(g.ok());
  std::string out(g->attr().size(), '\0');
  for (const auto& iv : ResolveVisibleIntervals(g->chunks(), g->attr().size(), g->inline_data().size())) {
    if (iv.source != VisibleInterval::Source::kChunk) continue;
    const Chunk& c = *iv.chunk;
    if (c.fid().empty()) {
      REQUIRE(c.data().size() == c.size());
      out.replace(iv.offset, iv.size, c.data().substr(iv.blob_offset, iv.size));
    } else if (blobs == nullptr) {
      out.replace(iv.offset, iv.size, std::string(iv.size, '?'));
    } else {
      std::string piece(iv.size, '\0');
      REQUIRE(blobs->Read(c.fid(), iv.blob_offset, iv.size, piece.data()).ok());
      out.replace(iv.offset, iv.size, piece);
    }
  }
  return out;
}

size_t JournalKeys(Harness& h, uint64_t ino) {
  std::string prefix = keys::JournalPrefix(ino);
  auto it = h.kv->Scan(prefix, keys::PrefixEnd(prefix));
  size_t n = 0;
  for (; it->Valid(); it->Next()) ++n;
  REQUIRE(it->status().ok());
  return n;
}

absl::StatusOr<CommitChunksResponse> Commit(Harness& h, uint64_t ino, std::vector<Chunk> chunks, bool sync = true) {
  CommitChunksRequest req;
  req.set_ino(ino);
  req.set_sync(sync);
  for (auto& c : chunks) *req.add_chunks() = std::move(c);
  return h.fs->CommitChunks(req);
}

}  // namespace

TEST_CASE("journaled chunks: the commit keeps their bytes, GetChunks returns them, a restart keeps them") {
  Harness h(KELP_BACKENDS);
  uint64_t f = h.Mkfile(1, "f");
  auto r = Commit(h, f, {Journaled(0, "hello world"), MakeChunk(Fid(1), 100, 10)});
  REQUIRE(r.ok());
  CHECK(r->attr().size() == 110);
  REQUIRE(Commit(h, f, {Journaled(6, "WORLD")}).ok());
  auto g = h.fs->GetChunks(f);
  REQUIRE(g.ok());
  REQUIRE(g->chunks_size() == 3);
  CHECK(g->chunks(0).data() == "hello world");
  CHECK(g->chunks(1).fid() == Fid(1));
  CHECK(g->chunks(1).data().empty());
  CHECK(g->chunks(2).data() == "WORLD");
  CHECK(Content(h, f, nullptr).substr(0, 11) == "hello WORLD");
  CHECK(JournalKeys(h, f) == 2);
  h.RequireConsistent();
  if (h.backend() == "rocksdb") {
    h.Restart();
    CHECK(h.fs->GetChunks(f)->chunks(2).data() == "WORLD");
    h.RequireConsistent();
  }
}

TEST_CASE("journaled commits that break the rules are refused with EINVAL") {
  Harness h(KELP_BACKENDS);
  uint64_t f = h.Mkfile(1, "f");
  Chunk short_data = Journaled(0, "abc");
  short_data.set_size(4);
  CHECK(Err(Commit(h, f, {short_data})) == EINVAL);
  Chunk both = MakeChunk(Fid(1), 0, 3);
  both.set_data("abc");
  CHECK(Err(Commit(h, f, {both})) == EINVAL);
  std::string big(kMaxJournalCommit / 2 + 1, 'x');
  CHECK(Err(Commit(h, f, {Journaled(0, big), Journaled(big.size(), big)})) == EINVAL);
  CHECK(h.fs->GetAttr(f)->size() == 0);
  CHECK(JournalKeys(h, f) == 0);
  h.RequireConsistent();
}

TEST_CASE("truncate trims journaled bytes, unlink drops them") {
  Harness h(KELP_BACKENDS);
  uint64_t f = h.Mkfile(1, "f");
  REQUIRE(Commit(h, f, {Journaled(0, "0123456789"), Journaled(20, "abcdefghij")}).ok());
  SetAttrRequest t;
  t.set_ino(f);
  t.set_valid(SET_ATTR_SIZE);
  t.set_size(5);
  REQUIRE(h.fs->SetAttr(t).ok());
  CHECK(JournalKeys(h, f) == 1);
  auto g = h.fs->GetChunks(f);
  REQUIRE(g->chunks_size() == 1);
  CHECK(g->chunks(0).data() == "01234");
  t.set_size(8);  // growing again reads zeros past the trimmed bytes
  REQUIRE(h.fs->SetAttr(t).ok());
  CHECK(Content(h, f, nullptr) == std::string("01234") + std::string(3, '\0'));
  h.RequireConsistent();

  REQUIRE(h.fs->Unlink(1, "f").ok());
  h.fs->RunMaintenance();
  CHECK(Err(h.fs->GetAttr(f)) == ENOENT);
  CHECK(JournalKeys(h, f) == 0);
  h.RequireConsistent();
}

TEST_CASE(
    "old journaled bytes move to one blob per inode, made durable before any record names it") {
  Harness h(KELP_BACKENDS);
  MemBlobs blobs;
  uint64_t f = h.Mkfile(1, "f");
  uint64_t g = h.Mkfile(1, "g");
  REQUIRE(Commit(h, f, {Journaled(0, "aaaa"), Journaled(2, "BB")}).ok());
  REQUIRE(Commit(h, g, {Journaled(10, "gggg")}).ok());
  auto before_f = h.fs->GetChunks(f);
  std::string want_f = Content(h, f, nullptr), want_g = Content(h, g, nullptr);
  int64_t committed_ms = h.clock.WallNs() / 1'000'000;

  // No blob store yet: nothing moves.
  CHECK(*h.fs->MoveJournal(committed_ms, 1 << 20) == 0);
  h.fs->SetBlobStore(&blobs);
  // Too young: nothing moves.
  CHECK(*h.fs->MoveJournal(committed_ms - 1, 1 << 20) == 0);
  // A volume server down: nothing lost, tried again later.
  blobs.fail = true;
  CHECK(Err(h.fs->MoveJournal(committed_ms, 1 << 20)) == EIO);
  CHECK(JournalKeys(h, f) == 2);
  blobs.fail = false;

  auto moved = h.fs->MoveJournal(committed_ms, 1 << 20);
  REQUIRE(moved.ok());
  CHECK(*moved == 10);
  CHECK(blobs.puts() == 2);
  // Uploaded without a sync each, then one sync of their volume for the round.
  CHECK(blobs.fsyncs() == 0);
  CHECK(blobs.syncs() == 1);
  CHECK(JournalKeys(h, f) == 0);
  CHECK(JournalKeys(h, g) == 0);
  auto after_f = h.fs->GetChunks(f);
  // The bytes did not change, so neither did the version: mounts keep their views.
  CHECK(after_f->attr().version() == before_f->attr().version());
  REQUIRE(after_f->chunks_size() == before_f->chunks_size());
  for (int i = 0; i < after_f->chunks_size(); ++i) {
    CHECK(after_f->chunks(i).seq() == before_f->chunks(i).seq());
    CHECK_FALSE(after_f->chunks(i).fid().empty());
    CHECK(blobs.durable(after_f->chunks(i).fid()));
    CHECK(after_f->chunks(i).data().empty());
  }
  CHECK(Content(h, f, &blobs) == want_f);
  CHECK(Content(h, g, &blobs) == want_g);
  CHECK(want_f == "aaBB");
  h.RequireConsistent();
}

TEST_CASE(
    "a journal move whose volume sync fails points no record at its blobs and loses nothing") {
  Harness h(KELP_BACKENDS);
  MemBlobs blobs;
  h.fs->SetBlobStore(&blobs);
  uint64_t f = h.Mkfile(1, "f");
  uint64_t g = h.Mkfile(1, "g");
  REQUIRE(Commit(h, f, {Journaled(0, "ffff")}).ok());
  REQUIRE(Commit(h, g, {Journaled(0, "gg")}).ok());
  int64_t committed_ms = h.clock.WallNs() / 1'000'000;

  blobs.fail_sync = true;
  CHECK(Err(h.fs->MoveJournal(committed_ms, 1 << 20)) == EIO);
  CHECK(blobs.puts() == 2);
  CHECK(blobs.discards() == 2);  // uploaded, never named: handed back
  CHECK(JournalKeys(h, f) == 1);
  CHECK(JournalKeys(h, g) == 1);
  for (uint64_t ino : {f, g}) {
    auto c = h.fs->GetChunks(ino);
    REQUIRE(c.ok());
    for (const auto& chunk : c->chunks()) CHECK(chunk.fid().empty());
  }
  CHECK(Content(h, f, nullptr) == "ffff");
  h.RequireConsistent();

  // A blob whose fid names no volume cannot be synced either: nothing relinked.
  blobs.fail_sync = false;
  blobs.bad_fid = true;
  CHECK_FALSE(h.fs->MoveJournal(committed_ms, 1 << 20).ok());
  CHECK(blobs.discards() == 4);
  CHECK(JournalKeys(h, f) + JournalKeys(h, g) == 2);

  // Both are still queued: the next round moves them.
  blobs.bad_fid = false;
  CHECK(*h.fs->MoveJournal(committed_ms, 1 << 20) == 6);
  CHECK(JournalKeys(h, f) + JournalKeys(h, g) == 0);
  CHECK(Content(h, f, &blobs) == "ffff");
  CHECK(Content(h, g, &blobs) == "gg");
  h.RequireConsistent();
}

TEST_CASE("GetChunks racing journal moves always returns the file's bytes") {
  Harness h(KELP_BACKENDS);
  MemBlobs blobs;
  h.fs->SetBlobStore(&blobs);
  uint64_t f = h.Mkfile(1, "f");
  std::string want;
  for (int i = 0; i < 8; ++i) {
    std::string piece(100, static_cast<char>('a' + i));
    REQUIRE(Commit(h, f, {Journaled(100 * i, piece)}).ok());
    want += piece;
  }
  std::atomic<bool> done{false};
  std::atomic<int> failures{0}, reads{0};
  std::thread reader([&] {
    while (!done.load()) {
      auto g = h.fs->GetChunks(f);
      if (!g.ok()) {
        failures.fetch_add(1);
        continue;
      }
      reads.fetch_add(1);
    }
  });
  // Each round journals a piece again (overwriting), then moves it while the reader reads.
  for (int round = 0; round < 200; ++round) {
    std::string piece(100, static_cast<char>('A' + round % 26));
    REQUIRE(Commit(h, f, {Journaled(100 * (round % 8), piece)}).ok());
    want.replace(100 * (round % 8), 100, piece);
    REQUIRE(h.fs->MoveJournal(h.clock.WallNs() / 1'000'000, 1 << 20).ok());
  }
  while (reads.load() < 10) std::this_thread::yield();
  done = true;
  reader.join();
  CHECK(failures.load() == 0);
  CHECK(Content(h, f, &blobs) == want);
  h.RequireConsistent();
}

TEST_CASE("journaled bytes left at a restart still move") {
  Harness h("rocksdb");
  MemBlobs blobs;
  uint64_t f = h.Mkfile(1, "f");
  uint64_t g = h.Mkfile(1, "g");
  REQUIRE(Commit(h, f, {Journaled(0, "before")}).ok());
  REQUIRE(Commit(h, g, {Journaled(0, "the restart")}).ok());
  int64_t committed_ms = h.clock.WallNs() / 1'000'000;
  h.Restart();
  h.fs->SetBlobStore(&blobs);
  CHECK(*h.fs->MoveJournal(committed_ms, 1 << 20) == 17);
  CHECK(JournalKeys(h, f) + JournalKeys(h, g) == 0);
  CHECK(Content(h, g, &blobs) == "the restart");
  h.RequireConsistent();
}

TEST_CASE("a round moves about max_bytes, oldest first, and the rest later") {
  Harness h(KELP_BACKENDS);
  MemBlobs blobs;
  h.fs->SetBlobStore(&blobs);
  uint64_t f = h.Mkfile(1, "f");
  for (int i = 0; i < 10; ++i) {
    REQUIRE(Commit(h, f, {Journaled(i * 100, std::string(100, 'a' + i))}).ok());
    h.clock.Advance(1ms);
  }
  int64_t now_ms = h.clock.WallNs() / 1'000'000;
  CHECK(*h.fs->MoveJournal(now_ms - 6, 350) == 300);  // the 3 oldest of the 5 due
  CHECK(JournalKeys(h, f) == 7);
  CHECK(*h.fs->MoveJournal(now_ms - 6, 1 << 20) == 200);  // the other 2; the rest is younger
  CHECK(JournalKeys(h, f) == 5);
  CHECK(*h.fs->MoveJournal(now_ms, 1 << 20) == 500);
  CHECK(JournalKeys(h, f) == 0);
  std::string want;
  for (int i = 0; i < 10; ++i) want += std::string(100, 'a' + i);
  CHECK(Content(h, f, &blobs) == want);
  CHECK(blobs.puts() == 3);  // an inode goes once a round: one blob per call
  h.RequireConsistent();
}

TEST_CASE("the maintenance loop moves journaled bytes once they are journal_age old") {
  Harness h(KELP_BACKENDS);
  MemBlobs blobs;
  h.fs->SetBlobStore(&blobs);
  uint64_t f = h.Mkfile(1, "f");
  REQUIRE(Commit(h, f, {Journaled(0, "fresh")}).ok());
  h.fs->RunMaintenance();
  CHECK(JournalKeys(h, f) == 1);
  h.clock.Advance(h.options().journal_age + 1s);
  h.fs->RunMaintenance();
  CHECK(JournalKeys(h, f) == 0);
  CHECK(Content(h, f, &blobs) == "fresh");
  h.RequireConsistent();
}
