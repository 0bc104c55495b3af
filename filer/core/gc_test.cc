#include "filer/core/test_util.h"

using namespace kelp::filer;
using namespace kelp::filer::testing;
using namespace std::chrono_literals;

namespace {

void Garbage(Harness& h, const std::string& name, std::vector<uint64_t> keys) {
  uint64_t f = h.Mkfile(1, name);
  CommitChunksRequest c;
  c.set_ino(f);
  uint64_t off = 0;
  for (uint64_t k : keys) *c.add_chunks() = MakeChunk(Fid(k), off++, 1);
  REQUIRE(h.fs->CommitChunks(c).ok());
  REQUIRE(h.fs->Unlink(1, name).ok());
}

}  // namespace

TEST_CASE("gc deletes queued blobs in batches and retries failures with backoff") {
  Harness h(KELP_BACKENDS, [](FilerOptions& o) {
    o.gc_batch = 3;
    o.gc_retry_min = std::chrono::milliseconds(1000);
  });
  Garbage(h, "a", {1, 2, 3, 4, 5});
  CHECK(h.GcFids().size() == 5);
  CHECK(h.fs->gc().pending() == 5);
  auto n = h.fs->gc().RunOnce();
  REQUIRE(n.ok());
  CHECK(*n == 3);
  CHECK(h.fs->gc().pending() == 2);
  CHECK(h.fs->gc().RunOnce().value() == 2);
  CHECK(h.fs->gc().RunOnce().value() == 0);
  CHECK(h.fs->gc().pending() == 0);
  CHECK(h.cluster.deleted().size() == 5);
  CHECK(h.GcFids().empty());

  h.cluster.SetFail(true);
  Garbage(h, "b", {6, 7});
  CHECK(h.fs->gc().RunOnce().value() == 0);
  CHECK(h.GcFids().size() == 2);  // kept for a retry...
  CHECK(h.fs->gc().pending() == 2);
  h.cluster.SetFail(false);
  int calls = h.cluster.delete_calls();
  CHECK(h.fs->gc().RunOnce().value() == 0);  // ...but not before the backoff
  CHECK(h.cluster.delete_calls() == calls);
  h.clock.Advance(1100ms);
  CHECK(h.fs->gc().RunOnce().value() == 2);
  CHECK(h.GcFids().empty());
  CHECK(h.fs->gc().deleted_total() == 7);
  CHECK(h.fs->gc().failed_total() == 2);
  h.RequireConsistent();
}

TEST_CASE("the gc loop runs in the background and stops cleanly") {
  Harness h(KELP_BACKENDS, [](FilerOptions& o) {
    o.background_loops = true;
    o.gc_gather = std::chrono::milliseconds(5);
  });
  Garbage(h, "a", {42});
  CHECK(h.cluster.WaitDeleted(Fid(42), 10s));
  h.fs->Stop();
}

TEST_CASE("the gc queue survives a restart and deletes nothing still referenced") {
  Harness h("rocksdb");
  h.cluster.SetFail(true);
  Garbage(h, "a", {1, 2});
  uint64_t live = h.Mkfile(1, "live");
  CommitChunksRequest c;
  c.set_ino(live);
  *c.add_chunks() = MakeChunk(Fid(3), 0, 10);
  REQUIRE(h.fs->CommitChunks(c).ok());
  CHECK(h.fs->gc().RunOnce().value() == 0);
  h.Restart();
  CHECK(h.GcFids() == std::vector<std::string>{Fid(1), Fid(2)});
  CHECK(h.fs->gc().pending() == 2);
  h.cluster.SetFail(false);
  h.clock.Advance(2s);
  CHECK(h.fs->gc().RunOnce().value() == 2);
  CHECK(h.fs->gc().pending() == 0);
  auto deleted = h.cluster.deleted();
  CHECK(std::find(deleted.begin(), deleted.end(), Fid(3)) == deleted.end());
  h.RequireConsistent();
}

TEST_CASE("after a restart the gc loop works on the queue it finds at once") {
  Harness h("rocksdb", [](FilerOptions& o) {
    o.background_loops = true;
    o.gc_gather = std::chrono::milliseconds(5);
    o.gc_idle_interval = std::chrono::hours(1);  // only a wake-up can start a round
  });
  h.cluster.SetFail(true);
  Garbage(h, "a", {7});
  // The failed attempt re-queues the blob with a backoff the fake clock never reaches...
  REQUIRE(WaitForCondition([&] { return h.fs->gc().failed_total() > 0; }, 10s));
  h.cluster.SetFail(false);
  h.clock.Advance(1h);
  // ...so only the restart's own round can delete it.
  h.Restart();
  CHECK(h.fs->gc().pending() == 1);
  CHECK(h.cluster.WaitDeleted(Fid(7), 10s));
  h.fs->Stop();
}
