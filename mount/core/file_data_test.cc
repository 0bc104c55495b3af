#include "mount/core/file_data.h"

#include <catch2/catch.hpp>
#include <sys/stat.h>

#include <limits>
#include <random>
#include <thread>

#include "mount/cache/tiered_cache.h"
#include "mount/testing/fake_blob_store.h"
#include "mount/testing/test_cache.h"
#include "mount/testing/test_filer.h"
#include "shared/status.h"
#include "shared/testing/temp_dir.h"

namespace kelp::mount {
namespace {

struct Env {
  TestFiler filer;
  FakeBlobStore blobs;
  WriteBudget budget;
  ThreadPool pool{"test-up", 4, 8};
  ChunkFetcher fetcher{&blobs, nullptr, nullptr, ChunkFetcher::Options{}};
  FileContext ctx;
  Attr attr;

  Env(uint64_t chunk, uint64_t budget_bytes, uint32_t max_inline) : budget(budget_bytes) {
    ctx.meta = filer.client();
    ctx.blobs = &blobs;
    ctx.fetcher = &fetcher;
    ctx.budget = &budget;
    ctx.uploads = &pool;
    ctx.chunk_size = chunk;
    ctx.max_inline = max_inline;
    filer::CreateRequest req;
    req.set_parent(1);
    req.set_name("f");
    req.set_mode(S_IFREG | 0644);
    attr = *filer.client()->Create(req);
  }
  std::shared_ptr<FileData> Open() { return std::make_shared<FileData>(&ctx, *filer.client()->GetAttr(attr.ino())); }
};

std::string ReadAll(FileData& f, uint64_t size) {
  std::string out(size, '\0');
  auto n = f.Read(0, size, out.data(), false);
  REQUIRE(n.ok());
  out.resize(*n);
  return out;
}

TEST_CASE("random writes, reads and flushes match a model, and survive a reopen") {
  for (uint32_t inl : {0u, 4096u}) {
    Env env(4096, 1 << 20, inl);
    auto f = env.Open();
    std::string model;
    std::mt19937 rng(inl + 1);
    for (int i = 0; i < 400; ++i) {
      int op = rng() % 10;
      if (op < 6) {
        uint64_t off = rng() % 40000;
        std::string d(1 + rng() % 6000, '\0');
        for (auto& c : d) c = static_cast<char>(rng());
        REQUIRE(f->Write(off, d).ok());
        if (model.size() < off + d.size()) model.resize(off + d.size(), '\0');
        model.replace(off, d.size(), d);
      } else if (op < 9) {
        uint64_t off = rng() % 45000;
        size_t len = rng() % 9000;
        std::string out(len, '?');
        auto n = f->Read(off, len, out.data(), rng() % 2);
        REQUIRE(n.ok());
        size_t want = off >= model.size() ? 0 : std::min<size_t>(len, model.size() - off);
        REQUIRE(*n == want);
        if (want > 0) REQUIRE(out.substr(0, *n) == model.substr(off, want));
      } else {
        REQUIRE(f->Flush(rng() % 2).ok());
      }
      REQUIRE(f->size() == model.size());
    }
    REQUIRE(f->Flush(false).ok());
    REQUIRE_FALSE(f->HasLocalChanges());
    auto g = env.Open();
    REQUIRE(g->size() == model.size());
    REQUIRE(ReadAll(*g, model.size()) == model);
    REQUIRE(env.budget.used() == 0);
  }
}

TEST_CASE("a read never takes an older upload still running over a newer one that finished") {
  Env env(4096, 1 << 20, 0);
  auto f = env.Open();
  auto wait = [](auto done) {
    for (int i = 0; i < 2000 && !done(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return done();
  };
  // The first full slot's upload is held inside its Put; the slot is written again and that
  // upload finishes first.
  env.blobs.HoldPutsStartingWith("a");
  REQUIRE(f->Write(0, std::string(4096, 'a')).ok());
  REQUIRE(wait([&] { return env.blobs.held() == 1; }));
  REQUIRE(f->Write(0, std::string(4096, 'b')).ok());
  REQUIRE(wait([&] { return env.blobs.puts() == 1; }));
  std::string out(4096, '?');
  REQUIRE(*f->Read(0, 4096, out.data(), false) == 4096);
  CHECK(out == std::string(4096, 'b'));
  // Once the older one lands too, and after a flush and a reopen, still the newer bytes.
  env.blobs.ReleaseHeld();
  REQUIRE(f->Flush(false).ok());
  REQUIRE(*f->Read(0, 4096, out.data(), false) == 4096);
  CHECK(out == std::string(4096, 'b'));
  CHECK(ReadAll(*env.Open(), 4096) == std::string(4096, 'b'));
}

TEST_CASE("a flush packs scattered small writes into one upload and one commit") {
  Env env(4 << 20, 64 << 20, 0);
  auto f = env.Open();
  for (int i = 0; i < 100; ++i) REQUIRE(f->Write(static_cast<uint64_t>(i) * 1000000, std::string(16384, 'a' + i % 26)).ok());
  REQUIRE(env.blobs.puts() == 0);
  REQUIRE(f->Flush(false).ok());
  REQUIRE(env.blobs.puts() == 1);
  REQUIRE(env.filer.calls(FilerMethod::kCommitChunks) == 1);
  auto g = env.Open();
  std::string out(16384, '\0');
  REQUIRE(*g->Read(42 * 1000000, 16384, out.data(), false) == 16384);
  REQUIRE(out == std::string(16384, 'a' + 42 % 26));
  REQUIRE(*g->Read(42 * 1000000 + 16384, 100, out.data(), false) == 100);
  REQUIRE(out.substr(0, 100) == std::string(100, '\0'));  // a hole reads as zeros
}

TEST_CASE("full chunks upload in the background before the flush") {
  Env env(64 << 10, 64 << 20, 0);
  auto f = env.Open();
  for (int i = 0; i < 16; ++i) REQUIRE(f->Write(static_cast<uint64_t>(i) * 16384, std::string(16384, 'x')).ok());
  // 256 KiB = 4 full 64 KiB chunks: uploaded without a flush.
  for (int i = 0; i < 1000 && env.blobs.puts() < 4; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  REQUIRE(env.blobs.puts() == 4);
  REQUIRE(env.filer.calls(FilerMethod::kCommitChunks) == 0);
  REQUIRE(f->Flush(false).ok());
  REQUIRE(env.filer.calls(FilerMethod::kCommitChunks) == 1);
}

TEST_CASE("an upload error comes back from write and flush, not swallowed") {
  Env env(4096, 1 << 20, 0);
  auto f = env.Open();
  env.blobs.fail_puts = EIO;
  REQUIRE(f->Write(0, std::string(100, 'a')).ok());
  absl::Status s = f->Flush(false);
  REQUIRE(ErrnoOf(s) == EIO);
  // A full chunk failing in the background makes the next write fail.
  REQUIRE(f->Write(0, std::string(8192, 'b')).ok());
  for (int i = 0; i < 1000; ++i) {
    if (!f->Write(0, "c").ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(ErrnoOf(f->Write(0, "c")) == EIO);
  REQUIRE(ErrnoOf(f->Flush(false)) == EIO);
  env.blobs.fail_puts = ENOSPC;
  REQUIRE(f->Write(0, std::string(100, 'a')).ok());
  REQUIRE(ErrnoOf(f->Flush(false)) == ENOSPC);
}

TEST_CASE("a commit that fails is retried by the next flush") {
  Env env(4096, 1 << 20, 0);
  auto f = env.Open();
  REQUIRE(f->Write(0, std::string(5000, 'a')).ok());
  env.filer.SetDown(true);
  REQUIRE(ErrnoOf(f->Flush(false)) == EIO);
  REQUIRE(f->HasLocalChanges());
  env.filer.SetDown(false);
  REQUIRE(f->Flush(false).ok());
  REQUIRE_FALSE(f->HasLocalChanges());
  REQUIRE(ReadAll(*env.Open(), 5000) == std::string(5000, 'a'));
}

TEST_CASE("small files are written inline, fsync syncs the filer and the uploads") {
  Env env(4 << 20, 64 << 20, 4096);
  auto f = env.Open();
  REQUIRE(f->Write(0, "hello").ok());
  REQUIRE(f->Flush(true).ok());
  REQUIRE(env.filer.calls(FilerMethod::kWriteInline) == 1);
  REQUIRE(env.blobs.puts() == 0);
  REQUIRE(env.filer.synced_calls() == 1);
  REQUIRE(f->Write(5, " world").ok());
  REQUIRE(f->Flush(false).ok());
  REQUIRE(ReadAll(*env.Open(), 11) == "hello world");
  // Growing past the inline limit: the fsync journals the few new bytes in its commit, over
  // the inline bottom layer (no upload).
  REQUIRE(f->Write(8000, "tail").ok());
  REQUIRE(f->Flush(true).ok());
  REQUIRE(env.blobs.puts() == 0);
  REQUIRE(env.filer.synced_calls() == 2);
  std::string all = ReadAll(*env.Open(), 8004);
  REQUIRE(all.substr(0, 11) == "hello world");
  REQUIRE(all.substr(8000) == "tail");
  REQUIRE(all.substr(11, 100) == std::string(100, '\0'));
  // A close (no fsync) uploads, journaling off or not.
  REQUIRE(f->Write(9000, "more").ok());
  REQUIRE(f->Flush(false).ok());
  REQUIRE(env.blobs.puts() == 1);
  REQUIRE(env.blobs.synced_puts() == 0);
  all = ReadAll(*env.Open(), 9004);
  REQUIRE(all.substr(8000, 4) == "tail");
  REQUIRE(all.substr(9000) == "more");
}

TEST_CASE("back-pressure: writing far more than the budget completes and stays bounded") {
  Env env(16 << 10, 64 << 10, 0);
  auto f = env.Open();
  env.budget.SetPressureCallback([&] { f->UploadDirty(); });
  std::mt19937 rng(3);
  std::string model;
  for (int i = 0; i < 400; ++i) {
    uint64_t off = rng() % ((1 << 20) - 4096);
    std::string d(4096, static_cast<char>(rng()));
    REQUIRE(f->Write(off, d).ok());
    if (model.size() < off + d.size()) model.resize(off + d.size(), '\0');
    model.replace(off, d.size(), d);
    REQUIRE(env.budget.used() <= env.budget.capacity());
  }
  REQUIRE(env.budget.waits() > 0);
  REQUIRE(f->Flush(false).ok());
  REQUIRE(env.budget.used() == 0);
  std::string got = ReadAll(*env.Open(), model.size());
  REQUIRE(got.size() == model.size());
  REQUIRE(got == model);
}

}  // namespace
}  // namespace kelp::mount

namespace kelp::mount {
namespace {

TEST_CASE("a writer that never closes still gets its uploaded chunks committed") {
  Env env(4096, 1 << 20, 0);
  auto f = env.Open();
  for (int i = 0; i < 200; ++i) REQUIRE(f->Write(static_cast<uint64_t>(i) * 4096, std::string(4096, 'w')).ok());
  // Background commits cover the uploaded prefix: uploads finish out of order under load, so
  // the first commit may be short; wait for the committed size to reach the threshold.
  auto committed = [&] { return env.filer.client()->GetAttr(env.attr.ino())->size(); };
  for (int i = 0; i < 500 && committed() < FileData::kBackgroundCommitChunks * 4096; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(env.filer.calls(FilerMethod::kCommitChunks) > 0);
  REQUIRE(committed() >= FileData::kBackgroundCommitChunks * 4096);
  REQUIRE(f->Flush(false).ok());
  REQUIRE(ReadAll(*env.Open(), 200 * 4096) == std::string(200 * 4096, 'w'));
}

}  // namespace
}  // namespace kelp::mount

namespace kelp::mount {
namespace {

// Durability: close commits lazily uploaded blobs; fsync makes every one of them durable
// (FakeBlobStore::volatile_blobs counts what a power cut would lose).
TEST_CASE("close uploads lazily, fsync syncs each volume of the file's blobs once") {
  Env env(64 << 10, 16 << 20, 0);
  env.ctx.journal_max = 0;  // the upload path (journaling is tested below)
  env.blobs.volumes = 3;
  auto f = env.Open();
  for (int i = 0; i < 10; ++i) REQUIRE(f->Write(i * (64 << 10), std::string(64 << 10, 'a' + i)).ok());
  REQUIRE(f->Write(10 * (64 << 10), "tail").ok());
  REQUIRE(f->Flush(false).ok());
  CHECK(env.blobs.puts() == 11);
  CHECK(env.blobs.synced_puts() == 0);
  CHECK(env.blobs.volatile_blobs() == 11);
  CHECK(env.blobs.sync_calls() == 0);
  CHECK(env.filer.synced_calls() == 0);

  REQUIRE(f->Flush(true).ok());
  CHECK(env.blobs.volatile_blobs() == 0);
  CHECK(env.blobs.sync_calls() == 1);
  CHECK(env.blobs.synced_volumes() == 3);

  // Nothing new: no volume sync (the filer's WAL is still synced).
  REQUIRE(f->Flush(true).ok());
  CHECK(env.blobs.sync_calls() == 1);

  // write + fsync with nothing else pending: the one upload is durable by itself.
  REQUIRE(f->Write(5, "x").ok());
  REQUIRE(f->Flush(true).ok());
  CHECK(env.blobs.synced_puts() == 1);
  CHECK(env.blobs.sync_calls() == 1);
  CHECK(env.blobs.volatile_blobs() == 0);
  // The filer: one Fsync for the close's commit, one commit with sync; the fsync with nothing
  // new asked for nothing.
  CHECK(env.filer.synced_calls() == 2);
}

TEST_CASE("a failed volume sync fails fsync with EIO, the next fsync syncs again") {
  Env env(64 << 10, 16 << 20, 0);
  env.blobs.volumes = 2;
  auto f = env.Open();
  for (int i = 0; i < 4; ++i) REQUIRE(f->Write(i * (64 << 10), std::string(64 << 10, 'b')).ok());
  env.blobs.fail_syncs = EIO;
  CHECK(ErrnoOf(f->Flush(true)) == EIO);
  CHECK(env.blobs.volatile_blobs() == 4);
  env.blobs.fail_syncs = 0;
  REQUIRE(f->Flush(true).ok());
  CHECK(env.blobs.volatile_blobs() == 0);
  REQUIRE(ReadAll(*env.Open(), 4 << 16) == std::string(4 << 16, 'b'));
}

TEST_CASE("fsync through a new descriptor covers what a closed one wrote") {
  Env env(64 << 10, 16 << 20, 0);
  env.blobs.volumes = 4;
  {
    auto f = env.Open();
    for (int i = 0; i < 8; ++i) REQUIRE(f->Write(i * (64 << 10), std::string(64 << 10, 'c')).ok());
    REQUIRE(f->Flush(false).ok());
    f->HandOverUnsynced();  // the last handle is gone (InodeTable::CloseFile)
  }
  CHECK(env.blobs.volatile_blobs() == 8);
  auto g = env.Open();
  REQUIRE(g->Flush(true).ok());
  CHECK(env.blobs.volatile_blobs() == 0);
  CHECK(env.blobs.synced_volumes() == 4);
}

// Waits (polling, bounded) until cond holds; false if it never did within 10 s.
template <typename Cond>
bool Eventually(Cond cond) {
  for (int i = 0; i < 2000 && !cond(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return cond();
}

TEST_CASE("writeback syncs closed files' volumes in the background, retrying a failed sync") {
  Env env(64 << 10, 16 << 20, 0);
  env.blobs.volumes = 4;
  {
    auto f = env.Open();
    for (int i = 0; i < 8; ++i) REQUIRE(f->Write(i * (64 << 10), std::string(64 << 10, 'w')).ok());
    REQUIRE(f->Flush(false).ok());
    f->HandOverUnsynced();
  }
  REQUIRE(env.blobs.volatile_blobs() == 8);
  env.blobs.fail_syncs = EIO;  // the servers are unreachable at first
  env.ctx.closed_unsynced.StartWriteback(&env.blobs, std::chrono::milliseconds(10));
  CHECK(Eventually([&] { return env.blobs.sync_calls() >= 2; }));
  CHECK(env.blobs.volatile_blobs() == 8);
  env.blobs.fail_syncs = 0;
  CHECK(Eventually([&] { return env.blobs.volatile_blobs() == 0; }));
  env.ctx.closed_unsynced.StopWriteback();
  // Nothing is owed any more: an fsync of another file syncs no volume.
  size_t calls = env.blobs.sync_calls();
  auto g = env.Open();
  REQUIRE(g->Flush(true).ok());
  CHECK(env.blobs.sync_calls() == calls);
}

TEST_CASE("stopping the writeback syncs what closed files left") {
  Env env(64 << 10, 16 << 20, 0);
  env.blobs.volumes = 2;
  env.ctx.closed_unsynced.StartWriteback(&env.blobs, std::chrono::hours(1));
  {
    auto f = env.Open();
    for (int i = 0; i < 4; ++i) REQUIRE(f->Write(i * (64 << 10), std::string(64 << 10, 's')).ok());
    REQUIRE(f->Flush(false).ok());
    f->HandOverUnsynced();
  }
  CHECK(env.blobs.volatile_blobs() == 4);
  env.ctx.closed_unsynced.StopWriteback();  // an unmount
  CHECK(env.blobs.volatile_blobs() == 0);
}

// An fsync with nothing owed (sysbench fsyncs every file it has open, changed or not) costs no
// filer RPC; one after a close that committed without sync does.
TEST_CASE("fsync of an unchanged file skips the filer's WAL sync") {
  Env env(64 << 10, 16 << 20, 0);
  auto f = env.Open();
  REQUIRE(f->Write(0, std::string(100, 'a')).ok());
  REQUIRE(f->Flush(true).ok());
  CHECK(env.filer.synced_calls() == 1);
  uint64_t calls = env.filer.total_calls();
  REQUIRE(f->Flush(true).ok());
  REQUIRE(f->Flush(true).ok());
  CHECK(env.filer.total_calls() == calls);
  CHECK(env.filer.calls(FilerMethod::kFsync) == 0);

  REQUIRE(f->Write(100, "b").ok());
  REQUIRE(f->Flush(false).ok());  // close: committed, not synced
  f->HandOverUnsynced();
  f.reset();
  auto g = env.Open();
  REQUIRE(g->Flush(true).ok());
  CHECK(env.filer.calls(FilerMethod::kFsync) == 1);
  CHECK(env.blobs.volatile_blobs() == 0);
  REQUIRE(ReadAll(*env.Open(), 101) == std::string(100, 'a') + "b");
}

}  // namespace
}  // namespace kelp::mount

namespace kelp::mount {
namespace {

// Journaled fsync: an fsync of at most journal_max dirty bytes sends them inside its commit;
// the filer's WAL sync is the only device flush (no blob, no volume sync).
TEST_CASE("an fsync of few bytes travels in its commit: one synced call, no upload") {
  Env env(4 << 20, 64 << 20, 0);
  env.ctx.journal_max = 64 << 10;
  auto f = env.Open();
  std::string model(1 << 20, '\0');
  std::mt19937 rng(7);
  for (int i = 0; i < 50; ++i) {
    uint64_t off = (rng() % 256) * 4096;
    std::string d(4096, static_cast<char>('a' + i % 26));
    REQUIRE(f->Write(off, d).ok());
    model.replace(off, d.size(), d);
    if (i == 0) REQUIRE(f->Write(model.size() - 1, std::string(1, model.back())).ok());  // the size
    REQUIRE(f->Flush(true).ok());
    // Read-your-writes from the journaled bytes this mount holds.
    std::string out(4096, '\0');
    REQUIRE(*f->Read(off, 4096, out.data(), false) == 4096);
    REQUIRE(out == d);
  }
  CHECK(env.blobs.puts() == 0);
  CHECK(env.blobs.sync_calls() == 0);
  CHECK(env.filer.calls(FilerMethod::kCommitChunks) == 50);
  CHECK(env.filer.synced_calls() == 50);
  CHECK(env.filer.calls(FilerMethod::kFsync) == 0);
  // The whole file through this handle: every journaled chunk from the bytes held here, two
  // extents of one commit sharing one buffer among them.
  REQUIRE(f->Write(8192, std::string(100, '1')).ok());
  REQUIRE(f->Write(900000, std::string(100, '2')).ok());
  REQUIRE(f->Flush(true).ok());
  model.replace(8192, 100, std::string(100, '1'));
  model.replace(900000, 100, std::string(100, '2'));
  REQUIRE(ReadAll(*f, model.size()) == model);
  // Another reader (a reopen: the bytes come from the filer's GetChunks).
  REQUIRE(ReadAll(*env.Open(), model.size()) == model);

  // More dirty bytes than journal_max: uploaded (durably, being the only upload), then committed.
  REQUIRE(f->Write(0, std::string(100 << 10, 'z')).ok());
  REQUIRE(f->Flush(true).ok());
  CHECK(env.blobs.puts() == 1);
  CHECK(env.blobs.synced_puts() == 1);
  CHECK(env.blobs.volatile_blobs() == 0);
  model.replace(0, 100 << 10, std::string(100 << 10, 'z'));
  REQUIRE(ReadAll(*env.Open(), model.size()) == model);
  REQUIRE(ReadAll(*f, model.size()) == model);
}

TEST_CASE("journaled bytes the filer moved to a blob read the same, and so do ones the mount forgot") {
  Env env(4 << 20, 64 << 20, 0);
  env.ctx.journal_memory = 8 << 10;  // the mount keeps at most 8 KiB of journaled bytes
  auto f = env.Open();
  std::string model;
  for (int i = 0; i < 8; ++i) {
    std::string d(3000, static_cast<char>('A' + i));
    REQUIRE(f->Write(i * 2000, d).ok());
    model.resize(std::max<size_t>(model.size(), i * 2000 + d.size()), '\0');
    model.replace(i * 2000, d.size(), d);
    REQUIRE(f->Flush(true).ok());
  }
  CHECK(env.blobs.puts() == 0);
  CHECK(env.ctx.journal_held.load() <= env.ctx.journal_memory + 3000);
  REQUIRE(ReadAll(*f, model.size()) == model);

  // The filer moves them to a blob of its own (its maintenance loop does this after journal_age).
  env.filer.core()->SetBlobStore(&env.blobs);
  auto moved = env.filer.core()->MoveJournal(std::numeric_limits<int64_t>::max(), 1 << 20);
  REQUIRE(moved.ok());
  CHECK(*moved == 8 * 3000);
  CHECK(env.blobs.puts() == 1);
  REQUIRE(ReadAll(*env.Open(), model.size()) == model);
  // This mount's view named the journaled records: the move changed no version, so it keeps
  // reading its own copy or the filer's, both the same bytes.
  REQUIRE(ReadAll(*f, model.size()) == model);
  env.filer.core()->SetBlobStore(nullptr);
}

// Past the memory bound, journaled bytes are let go even with a read cache (copying them into
// it cost more than reading them back: bench/RESULTS.md, "Night, 2026-12-07 (18)"): the cache
// takes none of them, memory stays bounded, and a read that needs them loads the chunk list
// once.
TEST_CASE(
    "journaled bytes past the memory bound are let go, not put in the read cache, and read back "
    "once") {
  Env env(4 << 20, 64 << 20, 0);
  kelp::testing::TempDir dir("kelp-journal-cache");
  auto opened = cache::TieredCache::Open(TestCacheOptions(dir.path()));
  REQUIRE(opened.ok());
  std::unique_ptr<cache::TieredCache> cache = std::move(*opened);
  ChunkFetcher fetcher(&env.blobs, cache.get(), nullptr, ChunkFetcher::Options{});
  env.ctx.fetcher = &fetcher;
  env.ctx.journal_memory = 8 << 10;
  auto f = env.Open();
  std::string model;
  for (int i = 0; i < 13; ++i) {
    std::string d(3000, static_cast<char>('A' + i));
    // Near each other, and apart; the last one covers the first.
    const uint64_t off = i == 12 ? 0 : (i % 2 == 0) ? i * 2000 : 100000 + i * 5000;
    REQUIRE(f->Write(off, d).ok());
    model.resize(std::max<size_t>(model.size(), off + d.size()), '\0');
    model.replace(off, d.size(), d);
    REQUIRE(f->Flush(true).ok());
    CHECK(env.ctx.journal_held.load() <= env.ctx.journal_memory);
  }
  CHECK(env.blobs.puts() == 0);
  const auto small = [&] { return cache->GetStats().tiers[static_cast<int>(cache::Tier::kSmall)]; };
  CHECK(small().entries == 0);
  const uint64_t loads = env.filer.calls(FilerMethod::kGetChunks);
  REQUIRE(ReadAll(*f, model.size()) == model);
  CHECK(env.filer.calls(FilerMethod::kGetChunks) == loads + 1);  // the view, let go, loaded again
  REQUIRE(ReadAll(*f, model.size()) == model);
  CHECK(env.filer.calls(FilerMethod::kGetChunks) == loads + 1);
  CHECK(small().entries == 0);
  env.ctx.fetcher = &env.fetcher;
  cache->Close();
}

// A file rewritten in place by many small fsyncs (a database page): the mount keeps the chunks
// and journaled bytes a read can still reach, not every commit since it loaded the file.
TEST_CASE("chunks newer commits cover are let go: rewriting a page keeps one copy of it") {
  Env env(4 << 20, 64 << 20, 0);
  auto f = env.Open();
  std::string model(64 << 10, '\0');
  REQUIRE(f->Write(0, model).ok());
  REQUIRE(f->Flush(true).ok());  // 64 KiB: journaled
  std::mt19937 rng(11);
  for (int i = 0; i < 200; ++i) {
    const uint64_t off = (rng() % 4) * 4096 + (i % 3) * 100;  // four pages, overlapping
    std::string d(4096, static_cast<char>('a' + i % 26));
    REQUIRE(f->Write(off, d).ok());
    model.replace(off, d.size(), d);
    REQUIRE(f->Flush(true).ok());
    REQUIRE(ReadAll(*f, model.size()) == model);
  }
  CHECK(env.blobs.puts() == 0);
  // The first 64 KiB commit is still visible past the rewritten pages, plus at most a few
  // overlapping 4 KiB ones (200 commits held ~800 KiB before).
  CHECK(env.ctx.journal_held.load() <= (64 << 10) + 8 * 4096);
  REQUIRE(ReadAll(*env.Open(), model.size()) == model);  // the filer has every commit
}

TEST_CASE("a journaled commit that fails keeps the bytes for the next flush") {
  Env env(4 << 20, 64 << 20, 0);
  auto f = env.Open();
  REQUIRE(f->Write(10000, std::string(5000, 'j')).ok());
  env.filer.SetDown(true);
  REQUIRE(ErrnoOf(f->Flush(true)) == EIO);
  REQUIRE(f->HasLocalChanges());
  std::string out(5000, '\0');
  REQUIRE(*f->Read(10000, 5000, out.data(), false) == 5000);  // still readable here
  REQUIRE(out == std::string(5000, 'j'));
  env.filer.SetDown(false);
  REQUIRE(f->Flush(true).ok());
  REQUIRE_FALSE(f->HasLocalChanges());
  CHECK(env.blobs.puts() == 0);
  std::string all = ReadAll(*env.Open(), 15000);
  REQUIRE(all.substr(10000) == std::string(5000, 'j'));
  REQUIRE(all.substr(0, 10000) == std::string(10000, '\0'));
}

}  // namespace
}  // namespace kelp::mount

namespace kelp::mount {
namespace {

// Two writers of one file: one's fsync takes both's dirty bytes into its upload; when that
// upload fails, the other's fsync must not return success without its bytes stored.
TEST_CASE("a failed upload's bytes stay dirty: no later fsync succeeds without them") {
  Env env(4 << 20, 64 << 20, 0);
  env.ctx.journal_max = 0;  // the upload path
  auto f = env.Open();
  REQUIRE(f->Write(0, std::string(300 << 10, 'a')).ok());        // writer A
  REQUIRE(f->Write(1 << 20, std::string(300 << 10, 'b')).ok());  // writer B
  env.blobs.fail_puts = EIO;
  CHECK(ErrnoOf(f->Flush(true)) == EIO);  // A's fsync
  CHECK(f->HasLocalChanges());
  CHECK(ErrnoOf(f->Flush(true)) == EIO);  // B's fsync: its bytes were in that upload
  // Newer writes win over the bytes that went back.
  REQUIRE(f->Write(0, std::string(100, 'n')).ok());
  std::string out(200, '\0');
  REQUIRE(*f->Read(0, 200, out.data(), false) == 200);
  CHECK(out == std::string(100, 'n') + std::string(100, 'a'));
  env.blobs.fail_puts = 0;
  REQUIRE(f->Flush(true).ok());
  CHECK_FALSE(f->HasLocalChanges());
  CHECK(env.budget.used() == 0);
  std::string want = std::string(100, 'n') + std::string((300 << 10) - 100, 'a');
  want.resize(1 << 20, '\0');
  want += std::string(300 << 10, 'b');
  REQUIRE(ReadAll(*env.Open(), want.size()) == want);
}

TEST_CASE("dirty buffer: WriteUnder fills only the gaps") {
  DirtyBuffer d(1 << 20);
  d.Write(10, "XX");
  d.Write(20, "YY");
  CHECK(d.WriteUnder(5, std::string(20, 'o')) == 16);
  std::string out(25, '.');
  d.Overlay(0, 25, out.data(), [](uint64_t, uint64_t) {});
  CHECK(out == ".....ooooo" "XX" "oooooooo" "YY" "ooo");
}

}  // namespace
}  // namespace kelp::mount
