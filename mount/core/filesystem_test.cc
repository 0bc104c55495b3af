#include "mount/core/filesystem.h"

#include <catch2/catch.hpp>
#include <fcntl.h>
#include <sys/stat.h>

#include <chrono>
#include <set>
#include <thread>

#include "mount/cache/tiered_cache.h"
#include "mount/testing/fake_blob_store.h"
#include "mount/testing/test_cache.h"
#include "mount/testing/test_filer.h"
#include "shared/metrics.h"
#include "shared/mutex.h"
#include "shared/status.h"
#include "shared/testing/temp_dir.h"

namespace kelp::mount {
namespace {

struct FsEnv {
  TestFiler filer;
  FakeBlobStore blobs;
  std::unique_ptr<Filesystem> fs;
  explicit FsEnv(FsOptions o = {}, ChunkCache* cache = nullptr) {
    o.subscribe = false;
    fs = std::make_unique<Filesystem>(filer.client(), &blobs, cache, o);
    REQUIRE(fs->Start().ok());
  }
};

std::string ReadFh(Filesystem& fs, uint64_t fh, size_t n) {
  std::string out(n, '\0');
  auto r = fs.Read(fh, 0, n, out.data());
  REQUIRE(r.ok());
  out.resize(*r);
  return out;
}

TEST_CASE("create, write, close, reopen and read back") {
  FsEnv e;
  Caller c{1000, 1000, 022};
  auto r = e.fs->Create(e.fs->root(), "a", 0644, O_CREAT | O_WRONLY, c);
  REQUIRE(r.ok());
  REQUIRE(r->attr.uid() == 1000);
  REQUIRE(e.fs->Write(r->fh, 0, "hello").ok());
  auto st = e.fs->GetAttr(r->attr.ino());
  REQUIRE(st->size() == 5);  // unflushed writes show in the size
  REQUIRE(e.fs->Flush(r->fh).ok());
  REQUIRE(e.fs->Release(r->fh).ok());
  auto a = e.fs->Lookup(e.fs->root(), "a");
  REQUIRE(a.ok());
  auto o = e.fs->Open(a->ino(), O_RDONLY);
  REQUIRE(o.ok());
  REQUIRE(ReadFh(*e.fs, o->fh, 100) == "hello");
  REQUIRE(e.fs->Release(o->fh).ok());
  REQUIRE(ErrnoOf(e.fs->Create(e.fs->root(), "a", 0644, O_CREAT | O_EXCL, c).status()) == EEXIST);
}

TEST_CASE("an unlinked open file stays readable until it is closed") {
  FsEnv e;
  Caller c;
  auto r = e.fs->Create(e.fs->root(), "f", 0644, O_CREAT | O_RDWR, c);
  REQUIRE(e.fs->Write(r->fh, 0, std::string(10000, 'z')).ok());
  REQUIRE(e.fs->Flush(r->fh).ok());
  uint64_t ino = r->attr.ino();
  REQUIRE(e.fs->Unlink(e.fs->root(), "f").ok());
  REQUIRE(ErrnoOf(e.fs->Lookup(e.fs->root(), "f").status()) == ENOENT);
  REQUIRE(e.filer.HasInode(ino));
  REQUIRE(ReadFh(*e.fs, r->fh, 20000) == std::string(10000, 'z'));
  REQUIRE(e.fs->Release(r->fh).ok());
  e.fs->session().FlushReleases();
  REQUIRE_FALSE(e.filer.HasInode(ino));
}

// The filer counts a file open once per mount; the mount counts its handles and releases the
// file at the filer when the last one closes. (It released once per file but counted every
// handle, so a file two handles had open at once stayed open at the filer until the unmount:
// unlinked, an orphan whose blobs stayed on the volume servers and in the read cache.)
TEST_CASE("a file several handles had open is released at the filer when the last one closes") {
  FsOptions o;
  o.unlink_behind = 0;  // the unlink reaches the filer before it returns
  FsEnv e(o);
  Caller c;
  auto w = e.fs->Create(e.fs->root(), "f", 0644, O_CREAT | O_RDWR, c);
  REQUIRE(w.ok());
  const uint64_t ino = w->attr.ino();
  const std::string data(10000, 'm');
  REQUIRE(e.fs->Write(w->fh, 0, data).ok());
  REQUIRE(e.fs->Flush(w->fh).ok());
  auto r1 = e.fs->Open(ino, O_RDONLY);
  auto r2 = e.fs->Open(ino, O_RDWR);
  REQUIRE(r1.ok());
  REQUIRE(r2.ok());
  SECTION("closed before the unlink") {
    for (uint64_t fh : {w->fh, r1->fh, r2->fh}) REQUIRE(e.fs->Release(fh).ok());
    e.fs->session().FlushReleases();
    REQUIRE(e.fs->Unlink(e.fs->root(), "f").ok());
    CHECK_FALSE(e.filer.HasInode(ino));
  }
  SECTION("the last handle closed after the unlink") {
    REQUIRE(e.fs->Unlink(e.fs->root(), "f").ok());
    REQUIRE(e.fs->Release(w->fh).ok());
    REQUIRE(e.fs->Release(r1->fh).ok());
    e.fs->session().FlushReleases();
    CHECK(e.filer.HasInode(ino));  // r2 still holds it
    CHECK(ReadFh(*e.fs, r2->fh, 20000) == data);
    REQUIRE(e.fs->Release(r2->fh).ok());
    e.fs->session().FlushReleases();
    CHECK_FALSE(e.filer.HasInode(ino));
  }
}

TEST_CASE("rename over an open file keeps the old data readable through its handle") {
  FsEnv e;
  Caller c;
  auto a = e.fs->Create(e.fs->root(), "a", 0644, O_CREAT | O_RDWR, c);
  REQUIRE(e.fs->Write(a->fh, 0, "old").ok());
  REQUIRE(e.fs->Flush(a->fh).ok());
  auto b = e.fs->Create(e.fs->root(), "b", 0644, O_CREAT | O_RDWR, c);
  REQUIRE(e.fs->Write(b->fh, 0, "new!").ok());
  REQUIRE(e.fs->Release(b->fh).ok());
  REQUIRE(e.fs->Rename(e.fs->root(), "b", e.fs->root(), "a", 0).ok());
  REQUIRE(ReadFh(*e.fs, a->fh, 10) == "old");
  auto l = e.fs->Lookup(e.fs->root(), "a");
  auto o = e.fs->Open(l->ino(), O_RDONLY);
  REQUIRE(ReadFh(*e.fs, o->fh, 10) == "new!");
  REQUIRE(e.fs->Release(o->fh).ok());
  REQUIRE(e.fs->Release(a->fh).ok());
}

TEST_CASE("negative lookups are cached, own changes update the cache") {
  FsOptions o;
  o.entry_ttl = std::chrono::seconds(60);
  FsEnv e(o);
  REQUIRE(ErrnoOf(e.fs->Lookup(e.fs->root(), "x").status()) == ENOENT);
  uint64_t calls = e.filer.total_calls();
  REQUIRE(ErrnoOf(e.fs->Lookup(e.fs->root(), "x").status()) == ENOENT);
  REQUIRE(e.filer.total_calls() == calls);  // served from the cache
  Caller c;
  REQUIRE(e.fs->MakeNode(e.fs->root(), "x", S_IFDIR | 0755, 0, c).ok());
  REQUIRE(e.fs->Lookup(e.fs->root(), "x").ok());
}

TEST_CASE("attributes saying no xattrs answer getxattr and listxattr without an RPC, SELinux labels and POSIX ACLs are refused") {
  FsOptions o;
  o.entry_ttl = std::chrono::seconds(60);
  FsEnv e(o);
  Caller c;
  auto a = e.fs->MakeNode(e.fs->root(), "f", S_IFREG | 0644, 0, c);
  REQUIRE(a.ok());
  uint64_t ino = a->ino();
  uint64_t calls = e.filer.total_calls();
  CHECK(ErrnoOf(e.fs->GetXattr(ino, "user.none").status()) == ENODATA);
  CHECK(e.fs->ListXattr(ino)->empty());
  // No SELinux labels, no POSIX ACLs: EOPNOTSUPP at once (so ls -l stops asking), never stored.
  for (const char* name : {"security.selinux", "system.posix_acl_access", "system.posix_acl_default"}) {
    CAPTURE(name);
    CHECK(ErrnoOf(e.fs->GetXattr(ino, name).status()) == EOPNOTSUPP);
    CHECK(ErrnoOf(e.fs->SetXattr(ino, name, std::string("\x02\0\0\0", 4), 0)) == EOPNOTSUPP);
    CHECK(ErrnoOf(e.fs->RemoveXattr(ino, name)) == EOPNOTSUPP);
  }
  CHECK(e.filer.total_calls() == calls);
  // Own change: seen at once, and a stale "no xattrs" reply cannot hide it.
  REQUIRE(e.fs->SetXattr(ino, "user.k", "v", 0).ok());
  CHECK(*e.fs->GetXattr(ino, "user.k") == "v");
  Attr stale = *a;
  stale.set_version(a->version() + 100);  // newer by version, still claiming no xattrs
  e.fs->meta_cache().PutAttr(stale);
  CHECK(*e.fs->GetXattr(ino, "user.k") == "v");
  CHECK(*e.fs->ListXattr(ino) == std::vector<std::string>{"user.k"});
  REQUIRE(e.fs->SetXattr(ino, "security.capability", "cap", 0).ok());  // other security.* names are kept
  CHECK(*e.fs->GetXattr(ino, "security.capability") == "cap");
  CHECK(*e.fs->ListXattr(ino) == std::vector<std::string>{"security.capability", "user.k"});
  REQUIRE(e.fs->RemoveXattr(ino, "user.k").ok());
  CHECK(ErrnoOf(e.fs->GetXattr(ino, "user.k").status()) == ENODATA);
}

TEST_CASE("a namespace change caches the directory's new attributes from the reply") {
  FsOptions o;
  o.attr_ttl = std::chrono::seconds(60);
  FsEnv e(o);
  Caller c;
  uint64_t root = e.fs->root();
  auto before = e.fs->GetAttr(root);
  REQUIRE(before.ok());
  REQUIRE(e.fs->MakeNode(root, "d", S_IFDIR | 0755, 0, c).ok());
  uint64_t calls = e.filer.total_calls();
  auto after = e.fs->GetAttr(root);  // the kernel asks right after, for permission checks
  REQUIRE(after.ok());
  CHECK(e.filer.total_calls() == calls);
  CHECK(after->nlink() == before->nlink() + 1);
  CHECK(after->version() > before->version());
  REQUIRE(e.fs->Rmdir(root, "d").ok());
  calls = e.filer.total_calls();
  CHECK(e.fs->GetAttr(root)->nlink() == before->nlink());
  CHECK(e.filer.total_calls() == calls);
}

TEST_CASE("readdir streams in batches with stable offsets") {
  FsEnv e;
  Caller c;
  const int n = 1500;
  for (int i = 0; i < n; ++i) REQUIRE(e.fs->MakeNode(e.fs->root(), "f" + std::to_string(i), S_IFREG | 0644, 0, c).ok());
  auto dh = e.fs->OpenDir(e.fs->root());
  REQUIRE(dh.ok());
  std::set<std::string> seen;
  uint64_t off = 0;
  // Read 7 entries per call, as a small kernel buffer would.
  while (true) {
    int got = 0;
    uint64_t next = off;
    REQUIRE(e.fs->ReadDir(*dh, off, false, [&](const Filesystem::DirItem& it) {
      if (got == 7) return false;
      REQUIRE(seen.insert(it.name).second);
      next = it.next_offset;
      ++got;
      return true;
    }).ok());
    if (got == 0) break;
    off = next;
  }
  REQUIRE(seen.size() == n + 2);
  REQUIRE(seen.count("."));
  REQUIRE(seen.count(".."));
  // Resuming from a remembered offset (telldir/seekdir) continues after that entry.
  std::vector<std::string> first;
  uint64_t after3 = 0;
  REQUIRE(e.fs->ReadDir(*dh, 0, true, [&](const Filesystem::DirItem& it) {
    first.push_back(it.name);
    if (first.size() == 5) after3 = it.next_offset;
    return first.size() < 10;
  }).ok());
  std::string sixth;
  REQUIRE(e.fs->ReadDir(*dh, after3, false, [&](const Filesystem::DirItem& it) {
    sixth = it.name;
    return false;
  }).ok());
  REQUIRE(sixth == first[5]);
  e.fs->ReleaseDir(*dh);
}

TEST_CASE("truncate flushes first, so dirty data past the new size does not come back") {
  FsEnv e;
  Caller c;
  auto r = e.fs->Create(e.fs->root(), "t", 0644, O_CREAT | O_RDWR, c);
  REQUIRE(e.fs->Write(r->fh, 0, std::string(10000, 'q')).ok());
  filer::SetAttrRequest req;
  req.set_valid(filer::SET_ATTR_SIZE);
  req.set_size(100);
  auto a = e.fs->SetAttr(r->attr.ino(), req);
  REQUIRE(a.ok());
  REQUIRE(a->size() == 100);
  REQUIRE(e.fs->Flush(r->fh).ok());
  REQUIRE(ReadFh(*e.fs, r->fh, 20000) == std::string(100, 'q'));
  REQUIRE(e.fs->Release(r->fh).ok());
}

TEST_CASE("times set on an opened file with data to commit go with the commit, other changes go at once") {
  FsEnv e;
  Caller c;
  auto made = e.fs->MakeNode(e.fs->root(), "w", S_IFREG | 0644, 0, c);
  REQUIRE(made.ok());
  auto r = e.fs->Open(made->ino(), O_RDWR);  // opened, not created, here
  REQUIRE(r.ok());
  const uint64_t ino = made->ino();
  filer::SetAttrRequest times;
  times.set_valid(filer::SET_ATTR_MTIME | filer::SET_ATTR_CTIME);
  times.set_mtime_ns(1'500'000'000'000'000'000);
  times.set_ctime_ns(1'600'000'000'000'000'000);
  // Nothing to commit: the filer takes the change now.
  uint64_t setattrs = e.filer.calls(filer::FilerMethod::kSetAttr);
  REQUIRE(e.fs->SetAttr(ino, times).ok());
  CHECK(e.filer.calls(filer::FilerMethod::kSetAttr) == setattrs + 1);
  // With dirty data (what the kernel's writeback cache sends before an fsync): kept here,
  // shown at once, and committed with the data by one synced call.
  REQUIRE(e.fs->Write(r->fh, 0, std::string(10000, 'w')).ok());
  times.set_mtime_ns(1'700'000'000'000'000'000);
  auto a = e.fs->SetAttr(ino, times);
  REQUIRE(a.ok());
  CHECK(a->mtime_ns() == 1'700'000'000'000'000'000);
  CHECK(e.filer.calls(filer::FilerMethod::kSetAttr) == setattrs + 1);
  const uint64_t commits = e.filer.calls(filer::FilerMethod::kCommitChunks);
  const uint64_t fsyncs = e.filer.calls(filer::FilerMethod::kFsync);
  REQUIRE(e.fs->Fsync(r->fh, false).ok());
  CHECK(e.filer.calls(filer::FilerMethod::kCommitChunks) == commits + 1);
  CHECK(e.filer.calls(filer::FilerMethod::kFsync) == fsyncs);
  CHECK(e.filer.calls(filer::FilerMethod::kSetAttr) == setattrs + 1);
  auto on_filer = e.filer.core()->GetAttr(ino);
  REQUIRE(on_filer.ok());
  CHECK(on_filer->mtime_ns() == 1'700'000'000'000'000'000);
  CHECK(on_filer->size() == 10000);
  // A mode change of a file opened here is not held, dirty data or not.
  REQUIRE(e.fs->Write(r->fh, 0, "x").ok());
  filer::SetAttrRequest mode;
  mode.set_valid(filer::SET_ATTR_MODE);
  mode.set_mode(0600);
  REQUIRE(e.fs->SetAttr(ino, mode).ok());
  CHECK(e.filer.calls(filer::FilerMethod::kSetAttr) == setattrs + 2);
  CHECK((e.filer.core()->GetAttr(ino)->mode() & 07777) == 0600);
  REQUIRE(e.fs->Release(r->fh).ok());
  auto ro = e.fs->Open(ino, O_RDONLY);
  REQUIRE(ro.ok());
  CHECK(ReadFh(*e.fs, ro->fh, 3) == "xww");
  REQUIRE(e.fs->Release(ro->fh).ok());
}

}  // namespace
}  // namespace kelp::mount

namespace kelp::mount {
namespace {

struct RecordingNotifier : KernelNotifier {
  Mutex mu;
  std::vector<std::pair<uint64_t, bool>> inodes ABSL_GUARDED_BY(mu);
  std::vector<std::pair<uint64_t, std::string>> entries ABSL_GUARDED_BY(mu);
  void InvalidateInode(uint64_t ino, bool data) override {
    MutexLock l(mu);
    inodes.emplace_back(ino, data);
  }
  void InvalidateEntry(uint64_t parent, std::string_view name) override {
    MutexLock l(mu);
    entries.emplace_back(parent, std::string(name));
  }
  bool HasEntry(const std::string& name) {
    MutexLock l(mu);
    for (auto& e : entries)
      if (e.second == name) return true;
    return false;
  }
  bool HasData(uint64_t ino) {
    MutexLock l(mu);
    for (auto& i : inodes)
      if (i.first == ino && i.second) return true;
    return false;
  }
};

// Polls f for up to 10 s.
template <typename F>
bool Eventually(F f) {
  for (int i = 0; i < 1000; ++i) {
    if (f()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST_CASE("a change through one mount invalidates the other mount's kernel caches, not its own") {
  TestFiler filer;
  auto second = filer.NewClient();
  FakeBlobStore blobs;
  FsOptions o;
  o.subscribe = true;
  Filesystem one(filer.client(), &blobs, nullptr, o), two(second.get(), &blobs, nullptr, o);
  REQUIRE(one.Start().ok());
  REQUIRE(two.Start().ok());
  RecordingNotifier n1, n2;
  one.StartEvents(&n1);
  two.StartEvents(&n2);
  // Subscriptions start "from now": both are live once the filer has them waiting for events.
  REQUIRE(Eventually([&] { return filer.core()->events().waiters() >= 2; }));
  auto seen_by = [&](Filesystem& fs) {
    uint64_t seq = filer.core()->events().published();
    return Eventually([&] { return fs.last_event_seq() >= seq; });
  };
  Caller c;
  REQUIRE(one.MakeNode(one.root(), "warmup", S_IFDIR | 0755, 0, c).ok());
  REQUIRE(seen_by(two));
  // Mount two cached "no such name" for it.
  REQUIRE(ErrnoOf(two.Lookup(two.root(), "news").status()) == ENOENT);
  auto r = one.Create(one.root(), "news", 0644, O_CREAT | O_RDWR, c);
  REQUIRE(r.ok());
  REQUIRE(Eventually([&] { return n2.HasEntry("news"); }));
  REQUIRE(two.Lookup(two.root(), "news").ok());  // its negative entry was dropped
  REQUIRE(one.Write(r->fh, 0, "data").ok());
  REQUIRE(one.Flush(r->fh).ok());
  REQUIRE(Eventually([&] { return n2.HasData(r->attr.ino()); }));
  // A change through mount two: once mount one has its event it is past its own changes,
  // which its subscription left out, so it told its kernel nothing about them.
  REQUIRE(two.MakeNode(two.root(), "from-two", S_IFDIR | 0755, 0, c).ok());
  REQUIRE(seen_by(one));
  REQUIRE(n1.HasEntry("from-two"));
  REQUIRE_FALSE(n1.HasEntry("warmup"));
  REQUIRE_FALSE(n1.HasEntry("news"));
  REQUIRE_FALSE(n1.HasData(r->attr.ino()));
  REQUIRE_FALSE(n2.HasEntry("from-two"));
  REQUIRE(one.Release(r->fh).ok());
  one.Stop();
  two.Stop();
}

TEST_CASE("an fsync that commits new data commits other open files' small dirty data ahead, durably") {
  FsEnv e;  // -syncAheadKB: 1 MiB
  Caller c;
  auto a = e.fs->Create(e.fs->root(), "a", 0644, O_CREAT | O_RDWR, c);
  auto b = e.fs->Create(e.fs->root(), "b", 0644, O_CREAT | O_RDWR, c);
  auto big = e.fs->Create(e.fs->root(), "big", 0644, O_CREAT | O_RDWR, c);
  REQUIRE((a.ok() && b.ok() && big.ok()));
  const std::string b_data(5000, 'b');  // over the inline size: journaled by an fsync
  REQUIRE(e.fs->Write(a->fh, 0, "aaa").ok());
  REQUIRE(e.fs->Write(b->fh, 0, b_data).ok());
  REQUIRE(e.fs->Write(big->fh, 0, std::string(300 << 10, 'x')).ok());  // over -journalMaxKB
  const uint64_t synced = e.filer.synced_calls();
  REQUIRE(e.fs->Fsync(a->fh, false).ok());
  // b's commit runs in the background, with a WAL sync of its own asked for.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  auto b_size = [&] { return e.filer.core()->GetAttr(b->attr.ino())->size(); };
  while ((b_size() != b_data.size() || e.filer.synced_calls() < synced + 2) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  REQUIRE(b_size() == b_data.size());
  REQUIRE(e.filer.synced_calls() == synced + 2);
  // A file whose fsync would upload is left to that fsync.
  CHECK(e.filer.core()->GetAttr(big->attr.ino())->size() == 0);
  // b's own fsync then finds nothing new: no call at all.
  const uint64_t calls = e.filer.total_calls();
  REQUIRE(e.fs->Fsync(b->fh, false).ok());
  CHECK(e.filer.total_calls() == calls);
  CHECK(ReadFh(*e.fs, b->fh, 10000) == b_data);
  for (uint64_t fh : {a->fh, b->fh, big->fh}) REQUIRE(e.fs->Release(fh).ok());
}

TEST_CASE("with syncAheadKB 0 an fsync commits its own file only") {
  FsOptions o;
  o.sync_ahead = 0;
  FsEnv e(o);
  Caller c;
  auto a = e.fs->Create(e.fs->root(), "a", 0644, O_CREAT | O_RDWR, c);
  auto b = e.fs->Create(e.fs->root(), "b", 0644, O_CREAT | O_RDWR, c);
  REQUIRE((a.ok() && b.ok()));
  REQUIRE(e.fs->Write(a->fh, 0, "aaa").ok());
  REQUIRE(e.fs->Write(b->fh, 0, std::string(5000, 'b')).ok());
  const uint64_t synced = e.filer.synced_calls();
  REQUIRE(e.fs->Fsync(a->fh, false).ok());
  CHECK(e.filer.synced_calls() == synced + 1);
  CHECK(e.filer.core()->GetAttr(b->attr.ino())->size() == 0);
  REQUIRE(e.fs->Fsync(b->fh, false).ok());
  CHECK(e.filer.core()->GetAttr(b->attr.ino())->size() == 5000);
  for (uint64_t fh : {a->fh, b->fh}) REQUIRE(e.fs->Release(fh).ok());
}

// ---- Unlinks behind (FsOptions::unlink_behind) ----

bool FilerHas(FsEnv& e, std::string_view name) { return e.filer.core()->Lookup(e.fs->root(), name).ok(); }

std::set<std::string> Listed(Filesystem& fs, uint64_t dir) {
  auto dh = fs.OpenDir(dir);
  REQUIRE(dh.ok());
  std::set<std::string> names;
  REQUIRE(fs.ReadDir(*dh, 0, true, [&](const Filesystem::DirItem& it) {
                names.insert(it.name);
                return true;
              }).ok());
  fs.ReleaseDir(*dh);
  return names;
}

TEST_CASE("an unlink behind returns before the filer has it, and what depends on it waits for it") {
  FsEnv e;
  Caller c;
  REQUIRE(e.fs->MakeNode(e.fs->root(), "f", S_IFREG | 0644, 0, c).ok());
  REQUIRE(e.fs->MakeNode(e.fs->root(), "g", S_IFREG | 0644, 0, c).ok());
  e.filer.SetDown(true);
  // The filer cannot be reached, and the unlink still returns: it is on its way.
  REQUIRE(e.fs->Unlink(e.fs->root(), "f").ok());
  CHECK(ErrnoOf(e.fs->Lookup(e.fs->root(), "f").status()) == ENOENT);
  CHECK(e.fs->GetAttr(e.fs->root()).ok());  // the kernel's permission check does not wait
  e.filer.SetDown(false);
  // A new file of the same name waits for the unlink to land, then is a new inode.
  auto again = e.fs->Create(e.fs->root(), "f", 0644, O_CREAT | O_EXCL | O_WRONLY, c);
  REQUIRE(again.ok());
  REQUIRE(e.fs->Release(again->fh).ok());
  CHECK(FilerHas(e, "f"));
  REQUIRE(e.fs->Unlink(e.fs->root(), "g").ok());
  CHECK(Listed(*e.fs, e.fs->root()) == std::set<std::string>{".", "..", "f"});  // waits for g's
  CHECK_FALSE(FilerHas(e, "g"));
  REQUIRE(e.fs->Unlink(e.fs->root(), "f").ok());
  REQUIRE(e.fs->FsyncDir(e.fs->root()).ok());  // durable means landed first
  CHECK_FALSE(FilerHas(e, "f"));
}

TEST_CASE("an rmdir and a rename wait for the unlinks behind, and the unmount sends what is left") {
  FsEnv e;
  Caller c;
  auto d = e.fs->MakeNode(e.fs->root(), "d", S_IFDIR | 0755, 0, c);
  REQUIRE(d.ok());
  for (int i = 0; i < 20; ++i) REQUIRE(e.fs->MakeNode(d->ino(), "f" + std::to_string(i), S_IFREG | 0644, 0, c).ok());
  REQUIRE(e.fs->MakeNode(e.fs->root(), "x", S_IFREG | 0644, 0, c).ok());
  for (int i = 0; i < 20; ++i) REQUIRE(e.fs->Unlink(d->ino(), "f" + std::to_string(i)).ok());
  REQUIRE(e.fs->Rmdir(e.fs->root(), "d").ok());  // not ENOTEMPTY
  CHECK_FALSE(FilerHas(e, "d"));
  REQUIRE(e.fs->MakeNode(e.fs->root(), "y", S_IFREG | 0644, 0, c).ok());
  REQUIRE(e.fs->Unlink(e.fs->root(), "y").ok());
  REQUIRE(e.fs->Rename(e.fs->root(), "x", e.fs->root(), "y", 0).ok());
  CHECK(FilerHas(e, "y"));
  CHECK_FALSE(FilerHas(e, "x"));
  REQUIRE(e.fs->Unlink(e.fs->root(), "y").ok());
  e.fs->Stop();
  CHECK_FALSE(FilerHas(e, "y"));
}

TEST_CASE(
    "a mount's own create does not come back as an event: its name stays cached for an unlink "
    "behind") {
  TestFiler filer;
  auto other = filer.NewClient();
  FakeBlobStore blobs;
  FsOptions o;
  o.subscribe = true;
  Filesystem fs(filer.client(), &blobs, nullptr, o);
  REQUIRE(fs.Start().ok());
  RecordingNotifier n;
  fs.StartEvents(&n);
  REQUIRE(Eventually([&] { return filer.core()->events().waiters() >= 1; }));
  Caller c;
  auto f = fs.Create(fs.root(), "f", 0644, O_CREAT | O_EXCL | O_WRONLY, c);
  REQUIRE(f.ok());
  REQUIRE(fs.Release(f->fh).ok());
  // Another client's change after it: once the mount has that event, it is past its own.
  filer::CreateRequest g;
  g.set_parent(fs.root());
  g.set_name("g");
  g.set_mode(S_IFREG | 0644);
  REQUIRE(other->Create(g).ok());
  uint64_t seq = filer.core()->events().published();
  REQUIRE(Eventually([&] { return fs.last_event_seq() >= seq; }));
  CHECK(n.HasEntry("g"));
  CHECK_FALSE(n.HasEntry("f"));
  filer.SetDown(true);
  // Answered from the name and attribute caches: an unlink behind, not a call that would fail.
  REQUIRE(fs.Unlink(fs.root(), "f").ok());
  CHECK(ErrnoOf(fs.Lookup(fs.root(), "f").status()) == ENOENT);
  filer.SetDown(false);
  REQUIRE(fs.FsyncDir(fs.root()).ok());
  CHECK_FALSE(filer.core()->Lookup(fs.root(), "f").ok());
  fs.Stop();
}

TEST_CASE("the unlink of an open file, of a hard-linked file, or with -unlinkBehind=0 waits for the filer") {
  FsOptions o;
  SECTION("open here") {
    FsEnv e(o);
    Caller c;
    auto f = e.fs->Create(e.fs->root(), "f", 0644, O_CREAT | O_WRONLY, c);
    REQUIRE(f.ok());
    REQUIRE(e.fs->Unlink(e.fs->root(), "f").ok());
    CHECK_FALSE(FilerHas(e, "f"));  // landed when Unlink returned: the filer keeps the orphan now
    REQUIRE(e.fs->Release(f->fh).ok());
  }
  SECTION("two links") {
    FsEnv e(o);
    Caller c;
    auto f = e.fs->MakeNode(e.fs->root(), "f", S_IFREG | 0644, 0, c);
    REQUIRE(f.ok());
    REQUIRE(e.fs->Link(f->ino(), e.fs->root(), "h").ok());
    REQUIRE(e.fs->Unlink(e.fs->root(), "f").ok());
    CHECK_FALSE(FilerHas(e, "f"));
    CHECK(e.fs->GetAttr(f->ino())->nlink() == 1);
  }
  SECTION("-unlinkBehind=0") {
    o.unlink_behind = 0;
    FsEnv e(o);
    Caller c;
    REQUIRE(e.fs->MakeNode(e.fs->root(), "f", S_IFREG | 0644, 0, c).ok());
    e.filer.SetDown(true);
    CHECK_FALSE(e.fs->Unlink(e.fs->root(), "f").ok());  // the filer could not be reached
    e.filer.SetDown(false);
    REQUIRE(e.fs->Unlink(e.fs->root(), "f").ok());
    CHECK_FALSE(FilerHas(e, "f"));
  }
}

TEST_CASE("the blobs of a file unlinked or renamed over leave the read cache") {
  kelp::testing::TempDir dir{"kelp-fs-test"};
  auto opened = cache::TieredCache::Open(TestCacheOptions(dir.path()));
  REQUIRE(opened.ok());
  cache::TieredCache& cache = **opened;
  auto entries = [&] {
    uint64_t n = 0;
    for (const cache::TierStats& t : cache.GetStats().tiers) n += t.entries;
    return n;
  };
  FsOptions o;
  SECTION("an unlink behind") {}
  SECTION("an unlink that waits for the filer") { o.unlink_behind = 0; }
  FsEnv e(o, &cache);
  Caller c;
  auto write = [&](const std::string& name, char fill) {
    auto f = e.fs->Create(e.fs->root(), name, 0644, O_CREAT | O_EXCL | O_WRONLY, c);
    REQUIRE(f.ok());
    REQUIRE(e.fs->Write(f->fh, 0, std::string(1 << 20, fill)).ok());
    REQUIRE(e.fs->Flush(f->fh).ok());
    REQUIRE(e.fs->Release(f->fh).ok());
  };
  write("f", 'f');
  const uint64_t per_file = entries();  // written through
  REQUIRE(per_file > 0);
  write("g", 'g');
  REQUIRE(entries() == 2 * per_file);
  // The filer answers the blobs to the unlink, or to the release of the last handle if that
  // was still on its way (the file was an orphan until then).
  REQUIRE(e.fs->Unlink(e.fs->root(), "f").ok());
  CHECK(Eventually([&] { return entries() == per_file; }));
  write("h", 'h');
  REQUIRE(e.fs->Rename(e.fs->root(), "h", e.fs->root(), "g", 0).ok());
  CHECK(Eventually([&] { return entries() == per_file; }));
  uint64_t forgotten = 0;
  for (const cache::TierStats& t : cache.GetStats().tiers) forgotten += t.forgotten;
  CHECK(forgotten == 2 * per_file);
  auto g = e.fs->Lookup(e.fs->root(), "g");
  REQUIRE(g.ok());
  auto r = e.fs->Open(g->ino(), O_RDONLY);
  REQUIRE(r.ok());
  CHECK(ReadFh(*e.fs, r->fh, 2 << 20) == std::string(1 << 20, 'h'));
  REQUIRE(e.fs->Release(r->fh).ok());
  e.fs->Stop();
  cache.Close();
}

// A mount stopped with a file still open (an unmount under a program that never closed it):
// the file's state goes while what it uses (the read cache's client, the counters) is still
// there. Past the journal's memory bound its journaled bytes were let go, not put in the cache.
TEST_CASE(
    "a file still open when the mount goes, past the journal bound, leaves nothing in the cache") {
  kelp::testing::TempDir dir{"kelp-fs-test"};
  auto opened = cache::TieredCache::Open(TestCacheOptions(dir.path()));
  REQUIRE(opened.ok());
  cache::TieredCache& cache = **opened;
  auto small_entries = [&] { return cache.GetStats().tiers[static_cast<int>(cache::Tier::kSmall)].entries; };
  FsOptions o;
  o.journal_memory = 4096;  // every commit past the first lets go of the file's view
  auto e = std::make_unique<FsEnv>(o, &cache);
  Caller c;
  auto f = e->fs->Create(e->fs->root(), "db", 0644, O_CREAT | O_EXCL | O_RDWR, c);
  REQUIRE(f.ok());
  std::string model;
  for (int i = 0; i < 8; ++i) {
    std::string d(8192, static_cast<char>('a' + i));
    REQUIRE(e->fs->Write(f->fh, i * 8192, d).ok());
    REQUIRE(e->fs->Fsync(f->fh, false).ok());
    model += d;
  }
  CHECK(ReadFh(*e->fs, f->fh, 8 * 8192) == model);
  CHECK(small_entries() == 0);
  e->fs->Stop();
  e.reset();  // "db" still open
  CHECK(small_entries() == 0);
  cache.Close();
}

TEST_CASE("an unlink behind that the filer refuses shows the name again") {
  FsEnv e;
  Caller c;
  REQUIRE(e.fs->MakeNode(e.fs->root(), "f", S_IFREG | 0644, 0, c).ok());
  auto* failed = MetricsRegistry::Default().GetCounter("kelp_mount_unlinks_behind_failed_total", "");
  uint64_t failed_before = failed->value();
  e.filer.SetDown(true);
  REQUIRE(e.fs->Unlink(e.fs->root(), "f").ok());
  // Meanwhile another client replaced the file by a directory: the filer will say EISDIR.
  REQUIRE(e.filer.core()->Unlink(e.fs->root(), "f").ok());
  filer::CreateArgs dir;
  dir.parent = e.fs->root();
  dir.name = "f";
  dir.mode = S_IFDIR | 0755;
  REQUIRE(e.filer.core()->Create(dir).ok());
  e.filer.SetDown(false);
  REQUIRE(e.fs->FsyncDir(e.fs->root()).ok());
  CHECK(failed->value() == failed_before + 1);
  auto shown = e.fs->Lookup(e.fs->root(), "f");
  REQUIRE(shown.ok());
  CHECK(S_ISDIR(shown->mode()));
}

}  // namespace
}  // namespace kelp::mount
