#include "mount/client/sync_tracking_meta_client.h"

#include <catch2/catch.hpp>
#include <sys/stat.h>

#include "mount/testing/fake_filer.h"

namespace kelp::mount {
namespace {

filer::CreateRequest NewFile(const char* name) {
  filer::CreateRequest req;
  req.set_parent(1);
  req.set_name(name);
  req.set_mode(S_IFREG | 0644);
  return req;
}

TEST_CASE("fsync reaches the filer only when a mutation is not yet covered by a WAL sync") {
  FakeFiler filer;
  SyncTrackingMetaClient meta(&filer);
  // Nothing changed yet: nothing to sync.
  REQUIRE(meta.Fsync(1).ok());
  CHECK(filer.fsyncs == 0);
  CHECK(meta.fsyncs_skipped() == 1);

  auto a = meta.Create(NewFile("a"), nullptr);
  REQUIRE(a.ok());
  REQUIRE(meta.SyncOwed());
  REQUIRE(meta.Fsync(a->ino()).ok());
  CHECK(filer.fsyncs == 1);
  REQUIRE(meta.Fsync(a->ino()).ok());  // nothing new
  CHECK(filer.fsyncs == 1);

  // Reads owe nothing; every kind of change does.
  REQUIRE(meta.GetAttr(a->ino()).ok());
  REQUIRE(meta.Lookup(1, "a").ok());
  CHECK_FALSE(meta.SyncOwed());
  filer::SetAttrRequest sa;
  sa.set_ino(a->ino());
  sa.set_mode(0600);
  sa.set_valid(filer::SET_ATTR_MODE);
  REQUIRE(meta.SetAttr(sa).ok());
  CHECK(meta.SyncOwed());
  REQUIRE(meta.Fsync(a->ino()).ok());
  CHECK(filer.fsyncs == 2);
  REQUIRE(meta.SetXattr(a->ino(), "user.k", "v", 0).ok());
  CHECK(meta.SyncOwed());
  REQUIRE(meta.Fsync(a->ino()).ok());
  // A failed mutation may still have been applied: it is owed too.
  REQUIRE_FALSE(meta.Unlink(1, "no-such-name", nullptr).ok());
  CHECK(meta.SyncOwed());
  REQUIRE(meta.Fsync(a->ino()).ok());
  CHECK(filer.fsyncs == 4);
}

TEST_CASE("a failed fsync leaves the sync owed") {
  FakeFiler filer;
  SyncTrackingMetaClient meta(&filer);
  REQUIRE(meta.Create(NewFile("a"), nullptr).ok());
  filer.down = true;
  REQUIRE_FALSE(meta.Fsync(1).ok());
  filer.down = false;
  CHECK(meta.SyncOwed());
  REQUIRE(meta.Fsync(1).ok());
  CHECK(filer.fsyncs == 1);
  CHECK_FALSE(meta.SyncOwed());
}

TEST_CASE("a synced commit covers the mutations before it, an unsynced one is owed") {
  FakeFiler filer;
  SyncTrackingMetaClient meta(&filer);
  auto a = meta.Create(NewFile("a"), nullptr);
  REQUIRE(a.ok());
  filer::CommitChunksRequest req;
  req.set_ino(a->ino());
  auto* c = req.add_chunks();
  c->set_fid("1,0000000000000001,00000001");
  c->set_offset(0);
  c->set_size(10);
  req.set_min_size(10);
  req.set_sync(true);
  REQUIRE(meta.CommitChunks(req).ok());
  CHECK_FALSE(meta.SyncOwed());
  req.set_sync(false);
  REQUIRE(meta.CommitChunks(req).ok());
  CHECK(meta.SyncOwed());
  REQUIRE(meta.WriteInline(a->ino(), "hello", 1, true).ok());
  CHECK_FALSE(meta.SyncOwed());
  REQUIRE(meta.WriteInline(a->ino(), "hello", 1, false).ok());
  CHECK(meta.SyncOwed());
  CHECK(filer.fsyncs == 0);
}

}  // namespace
}  // namespace kelp::mount
