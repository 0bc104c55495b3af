// End to end: FilerService behind FilerRpcService on a real rpc::Server on 127.0.0.1:0,
// driven through FilerClient, so statuses and errnos cross the wire both ways.
#include "filer/rpc/filer_rpc_service.h"

#include <sys/stat.h>

#include <set>
#include <thread>

#include "filer/client/filer_client.h"
#include "filer/client/limits.h"
#include "filer/core/test_util.h"
#include "filer/rpc/rpc_test_server.h"
#include "shared/metrics.h"
#include "shared/status.h"

using namespace kelp::filer;
using namespace kelp::filer::testing;
using kelp::ErrnoOf;
using namespace std::chrono_literals;

namespace {

class ThrowingCluster : public FakeCluster {
 public:
  absl::StatusOr<kelp::cluster::AssignResponse> Assign(const kelp::cluster::AssignRequest&) override {
    throw std::runtime_error("boom");
  }
};

}  // namespace

TEST_CASE("filer rpc: namespace operations, and errno travels back") {
  Harness h("memory");
  Server s(h.fs.get());
  FilerClient& c = *s.client;

  auto d = c.Mkdir(1, "d", 0755, 1, 2);
  REQUIRE(d.ok());
  CHECK(S_ISDIR(d->mode()));
  CHECK(d->uid() == 1);
  auto f = c.Create(File(d->ino(), "f"));
  REQUIRE(f.ok());
  CHECK(c.Lookup(d->ino(), "f")->ino() == f->ino());
  CHECK(c.GetAttr(f->ino())->nlink() == 1);
  CHECK(c.ResolvePath("/d/f")->ino() == f->ino());
  CHECK(c.Link(f->ino(), 1, "hard")->nlink() == 2);
  CHECK(c.Symlink(1, "sym", "d/f", 0, 0)->symlink_target() == "d/f");

  // Errors: code and errno both survive the trip.
  auto missing = c.Lookup(d->ino(), "nope");
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
  CHECK(ErrnoOf(missing.status()) == ENOENT);
  auto unknown = c.GetAttr(987654);
  CHECK(unknown.status().code() == absl::StatusCode::kNotFound);
  CHECK(ErrnoOf(c.Rmdir(1, "d")) == ENOTEMPTY);
  CHECK(ErrnoOf(c.Unlink(1, "d").status()) == EISDIR);
  CHECK(ErrnoOf(c.Create(File(d->ino(), "f")).status()) == EEXIST);
  CHECK(ErrnoOf(c.Link(d->ino(), 1, "x").status()) == EPERM);
  for (std::string bad : {std::string(""), std::string("a/b"), std::string("a\0b", 3), std::string("..")}) {
    auto r = c.Create(File(1, bad));
    CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(ErrnoOf(r.status()) == EINVAL);
  }
  auto longname = c.Create(File(1, std::string(256, 'x')));
  CHECK(longname.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(ErrnoOf(longname.status()) == ENAMETOOLONG);
  CHECK(ErrnoOf(c.Create(File(f->ino(), "x")).status()) == ENOTDIR);
  CHECK(ErrnoOf(c.Rename(1, "d", d->ino(), "loop", 0).status()) == EINVAL);
  CHECK(ErrnoOf(c.Rename(1, "hard", 1, "sym", kRenameNoReplace).status()) == EEXIST);

  auto ex = c.Rename(1, "hard", 1, "sym", kRenameExchange);
  REQUIRE(ex.ok());
  CHECK(ex->moved().ino() == f->ino());
  CHECK(c.Lookup(1, "sym")->ino() == f->ino());
  auto rep = c.Rename(1, "sym", d->ino(), "f", 0);  // two links of one inode: no-op
  REQUIRE(rep.ok());

  SetAttrRequest sa;
  sa.set_ino(f->ino());
  sa.set_valid(SET_ATTR_MODE | SET_ATTR_MTIME);
  sa.set_mode(0600);
  sa.set_mtime_ns(12345);
  auto attr = c.SetAttr(sa);
  REQUIRE(attr.ok());
  CHECK(attr->mode() == (S_IFREG | 0600));
  CHECK(attr->mtime_ns() == 12345);

  REQUIRE(c.SetXattr(f->ino(), "user.a", std::string("v\0v", 3), kXattrCreate).ok());
  CHECK(*c.GetXattr(f->ino(), "user.a") == std::string("v\0v", 3));
  CHECK(*c.ListXattr(f->ino()) == std::vector<std::string>{"user.a"});
  CHECK(ErrnoOf(c.GetXattr(f->ino(), "user.b").status()) == ENODATA);
  CHECK(ErrnoOf(c.SetXattr(f->ino(), "user.a", "x", kXattrCreate)) == EEXIST);
  CHECK(ErrnoOf(c.SetXattr(f->ino(), "user.a", std::string(kMaxXattrValueLen + 1, 'x'), 0)) == E2BIG);
  REQUIRE(c.RemoveXattr(f->ino(), "user.a").ok());
  CHECK(ErrnoOf(c.RemoveXattr(f->ino(), "user.a")) == ENODATA);

  CHECK(c.Unlink(1, "sym")->nlink() == 1);
  REQUIRE(c.Unlink(d->ino(), "f").ok());
  REQUIRE(c.Rmdir(1, "d").ok());
  h.RequireConsistent();
  std::string metrics = kelp::MetricsRegistry::Default().Render();
  CHECK(metrics.find("kelp_filer_rpc_seconds") != std::string::npos);
  CHECK(metrics.find("kelp_filer_rpc_errors_total") != std::string::npos);
  CHECK(metrics.find("kelp_filer_inodes") != std::string::npos);
}

// The mount caches these instead of asking for the directory again after every change.

TEST_CASE("filer rpc: namespace replies carry the directory's attributes after the change") {
  Harness h(KELP_BACKENDS);
  Server s(h.fs.get());
  FilerClient& c = *s.client;
  uint64_t d = h.Mkdir(1, "d");
  uint64_t e = h.Mkdir(1, "e");
  uint64_t before = h.fs->GetAttr(d)->version();

  Attr after;
  auto created = c.Create(File(d, "f"), &after);
  REQUIRE(created.ok());
  CHECK(after.ino() == d);
  CHECK(after.version() > before);
  CHECK(after.mtime_ns() == h.fs->GetAttr(d)->mtime_ns());

  CreateRequest sub = File(d, "sub");
  sub.set_mode(S_IFDIR | 0755);
  after.Clear();
  REQUIRE(c.Create(sub, &after).ok());
  CHECK(after.nlink() == 3);

  SymlinkRequest sl;
  sl.set_parent(d);
  sl.set_name("l");
  sl.set_target("f");
  after.Clear();
  REQUIRE(c.Symlink(sl, &after).ok());
  CHECK(after.ino() == d);

  after.Clear();
  REQUIRE(c.Link(created->ino(), e, "f2", &after).ok());
  CHECK(after.ino() == e);

  auto renamed = c.Rename(d, "f", e, "g", 0);
  REQUIRE(renamed.ok());
  CHECK(renamed->parent_attr().ino() == d);
  CHECK(renamed->new_parent_attr().ino() == e);

  after.Clear();
  REQUIRE(c.Unlink(e, "g", &after).ok());
  CHECK(after.ino() == e);
  CHECK(after.version() == h.fs->GetAttr(e)->version());

  after.Clear();
  REQUIRE(c.Rmdir(d, "sub", &after).ok());
  CHECK(after.ino() == d);
  CHECK(after.nlink() == 2);

  // A failed change carries nothing.
  after.Clear();
  CHECK_FALSE(c.Create(File(d, "l"), &after).ok());
  CHECK(after.ino() == 0);
}

TEST_CASE("filer rpc: an unlink batch runs each unlink on its own, in order, with a result each") {
  Harness h(KELP_BACKENDS);
  Server s(h.fs.get());
  FilerClient& c = *s.client;
  uint64_t d = h.Mkdir(1, "d");
  for (const char* n : {"a", "b"}) REQUIRE(c.Create(File(d, n)).ok());
  UnlinkBatchRequest req;
  auto add = [&](uint64_t parent, const std::string& name) {
    UnlinkRequest* u = req.add_unlinks();
    u->set_parent(parent);
    u->set_name(name);
  };
  add(d, "a");
  add(d, "missing");
  add(1, "d");  // a directory: EISDIR, and the batch goes on
  add(d, "b");
  add(d, "a");  // already gone by the first
  auto r = c.UnlinkBatch(req);
  REQUIRE(r.ok());
  REQUIRE(r->results_size() == 5);
  CHECK(r->results(0).errno_value() == 0);
  CHECK(r->results(0).done().attr().nlink() == 0);
  CHECK(r->results(0).done().parent_attr().ino() == d);
  CHECK(r->results(1).errno_value() == ENOENT);
  CHECK(r->results(2).errno_value() == EISDIR);
  CHECK_FALSE(r->results(2).error().empty());
  CHECK(r->results(3).errno_value() == 0);
  // Each result carries the directory as that unlink left it: versions one apart.
  CHECK(r->results(3).done().parent_attr().version() == r->results(0).done().parent_attr().version() + 1);
  CHECK(r->results(4).errno_value() == ENOENT);
  CHECK(ErrnoOf(h.fs->Lookup(d, "b").status()) == ENOENT);
  CHECK(c.calls(FilerMethod::kUnlinkBatch) == 1);

  UnlinkBatchRequest big;
  for (int i = 0; i <= FilerRpcService::kMaxUnlinkBatch; ++i) {
    UnlinkRequest* u = big.add_unlinks();
    u->set_parent(d);
    u->set_name("x");
  }
  CHECK(c.UnlinkBatch(big).status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("filer rpc: a commit batch applies each commit on its own and in order and syncs once") {
  Harness h(KELP_BACKENDS);
  Server s(h.fs.get());
  FilerClient& c = *s.client;
  auto a = c.Create(File(1, "a"));
  auto b = c.Create(File(1, "b"));
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  uint64_t d = h.Mkdir(1, "d");
  {
    // The first chunks take a range of seqs, durably: before the syncs are counted.
    CommitChunksRequest warm;
    warm.set_ino(b->ino());
    Chunk* ch = warm.add_chunks();
    ch->set_size(3);
    ch->set_data("abc");
    REQUIRE(c.CommitChunks(warm).ok());
  }
  CommitBatchRequest req;
  auto add = [&](uint64_t ino, uint64_t offset, std::string data) {
    CommitChunksRequest* r = req.add_commits();
    r->set_ino(ino);
    Chunk* ch = r->add_chunks();
    ch->set_offset(offset);
    ch->set_size(data.size());
    ch->set_data(std::move(data));  // journaled: the bytes travel with the commit
    r->set_sync(true);
  };
  add(a->ino(), 0, "hello");
  add(999'999, 0, "nobody");  // no such inode: ENOENT, and the batch goes on
  add(d, 0, "a directory");
  add(b->ino(), 3, "xyz");
  add(a->ino(), 5, " world");  // after the first: a's seqs grow in batch order
  kelp::Counter* syncs = kelp::MetricsRegistry::Default().GetCounter("kelp_filer_wal_syncs_total", "");
  uint64_t syncs_before = syncs->value();
  auto r = c.CommitBatch(req);
  REQUIRE(r.ok());
  REQUIRE(r->results_size() == 5);
  CHECK(r->results(0).errno_value() == 0);
  CHECK(r->results(0).done().attr().size() == 5);
  CHECK(r->results(1).errno_value() == ENOENT);
  CHECK_FALSE(r->results(1).error().empty());
  CHECK(r->results(2).errno_value() != 0);
  CHECK(r->results(3).errno_value() == 0);
  CHECK(r->results(3).done().attr().size() == 6);
  CHECK(r->results(4).errno_value() == 0);
  CHECK(r->results(4).done().attr().size() == 11);
  CHECK(r->results(4).done().seqs(0) > r->results(0).done().seqs(0));
  if (h.backend() == "rocksdb") CHECK(syncs->value() == syncs_before + 1);  // one WAL sync for the batch
  auto chunks = c.GetChunks(a->ino());
  REQUIRE(chunks.ok());
  CHECK(chunks->attr().size() == 11);
  CHECK(chunks->chunks_size() == 2);
  CHECK(c.calls(FilerMethod::kCommitBatch) == 1);

  CommitBatchRequest big;
  for (int i = 0; i <= FilerRpcService::kMaxCommitBatch; ++i) {
    CommitChunksRequest* one = big.add_commits();
    one->set_ino(a->ino());
  }
  CHECK(c.CommitBatch(big).status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("filer rpc: readdir pages through a big directory with stable cookies") {
  Harness h("memory");
  Server s(h.fs.get());
  FilerClient& c = *s.client;
  uint64_t d = c.Mkdir(1, "big", 0755, 0, 0)->ino();
  const int n = 3000;
  for (int i = 0; i < n; ++i) REQUIRE(c.Create(File(d, "e" + std::to_string(i))).ok());
  std::set<std::string> seen;
  uint64_t last = 0;
  REQUIRE(c.ReadDir(d, 0, 0, true, [&](DirEntry&& e) {
             CHECK(e.attr().ino() == e.ino());
             CHECK(e.cookie() > last);
             last = e.cookie();
             seen.insert(e.name());
             return true;
           }).ok());
  CHECK(seen.size() == n);

  // Resume in pages through the client, and stop early.
  seen.clear();
  uint64_t cookie = 0;
  for (;;) {
    int got = 0;
    REQUIRE(c.ReadDir(d, cookie, 700, false, [&](DirEntry&& e) {
               CHECK(seen.insert(e.name()).second);
               cookie = e.cookie();
               ++got;
               return true;
             }).ok());
    if (got == 0) break;
  }
  CHECK(seen.size() == n);
  int calls = 0;
  REQUIRE(c.ReadDir(d, 0, 0, false, [&](DirEntry&&) { return ++calls < 10; }).ok());
  CHECK(calls == 10);
  // One page by hand: eof only at the end.
  auto page = c.ReadDirPage(d, 0, 100, false);
  REQUIRE(page.ok());
  CHECK(page->entries_size() == 100);
  CHECK_FALSE(page->eof());
  auto last_page = c.ReadDirPage(d, page->entries(99).cookie(), 0, false);
  REQUIRE(last_page.ok());
  CHECK(last_page->entries_size() == n - 100);
  CHECK(last_page->eof());
  CHECK(ErrnoOf(c.ReadDir(424242, 0, 0, false, [](DirEntry&&) { return true; })) == ENOENT);
  CHECK(ErrnoOf(c.ReadDir(c.Lookup(d, "e1")->ino(), 0, 0, false,
                          [](DirEntry&&) { return true; })) == ENOTDIR);
}

TEST_CASE("filer rpc: chunks, inline data, sessions, statfs and cluster pass-through") {
  Harness h("memory");
  Server s(h.fs.get());
  FilerClient& c = *s.client;
  auto session = c.OpenSession("test-mount");
  REQUIRE(session.ok());
  CHECK(session->lease_ms() > 0);
  CreateRequest cr = File(1, "f");
  cr.set_session(session->session());
  cr.set_open_handle(true);
  auto f = c.Create(cr);
  REQUIRE(f.ok());

  kelp::cluster::AssignRequest ar;
  ar.set_count(2);
  auto assigned = c.Assign(ar);
  REQUIRE(assigned.ok());
  CHECK(assigned->count() == 2);
  CHECK(assigned->locations(0).url() == "127.0.0.1:8080");
  kelp::cluster::LookupVolumeRequest lv;
  lv.add_volume_ids(1);
  CHECK(c.LookupVolume(lv)->volumes(0).locations(0).url() == "127.0.0.1:8080");

  CommitChunksRequest commit;
  commit.set_ino(f->ino());
  *commit.add_chunks() = MakeChunk(assigned->fid(), 0, 4096);
  *commit.add_chunks() = MakeChunk(assigned->fid() + "_1", 4096, 100);
  commit.set_sync(true);
  auto committed = c.CommitChunks(commit);
  REQUIRE(committed.ok());
  CHECK(committed->seqs_size() == 2);
  CHECK(committed->attr().size() == 4196);
  auto chunks = c.GetChunks(f->ino());
  REQUIRE(chunks.ok());
  CHECK(chunks->chunks_size() == 2);
  CHECK(chunks->chunks(1).fid() == assigned->fid() + "_1");
  commit.mutable_chunks(0)->set_fid("garbage");
  CHECK(ErrnoOf(c.CommitChunks(commit).status()) == EINVAL);
  REQUIRE(c.Fsync(f->ino()).ok());

  auto small = c.Create(File(1, "small"));
  CHECK(c.WriteInline(small->ino(), "abc", 0, true)->size() == 3);
  CHECK(c.GetChunks(small->ino())->inline_data() == "abc");
  CHECK(ErrnoOf(c.WriteInline(small->ino(), std::string(kMaxInlineSize + 1, 'x'), 0, false).status()) ==
        EINVAL);

  // Unlink while open; the orphan lives until Release.
  REQUIRE(c.Unlink(1, "f").ok());
  CHECK(c.GetAttr(f->ino())->nlink() == 0);
  REQUIRE(c.KeepAlive(session->session()).ok());
  REQUIRE(c.Release(session->session(), {f->ino()}).ok());
  CHECK(ErrnoOf(c.GetAttr(f->ino()).status()) == ENOENT);
  CHECK(h.GcFids().size() == 2);
  CHECK(c.KeepAlive("never-opened").code() == absl::StatusCode::kNotFound);
  REQUIRE(c.KeepAlive("reattached", {small->ino()}, true).ok());
  auto opened = c.Open("reattached", small->ino(), true);
  REQUIRE(opened.ok());
  CHECK(opened->attr().size() == 3);
  CHECK(opened->inline_data() == "abc");

  auto st = c.StatFs();
  REQUIRE(st.ok());
  CHECK(st->name_max() == 255);
  CHECK(st->total_files() - st->free_files() == 2);
}

TEST_CASE("filer rpc: subscribe streams history, then live events, and ends on shutdown") {
  Harness h("memory");
  auto s = std::make_unique<Server>(h.fs.get());
  FilerClient& c = *s->client;
  REQUIRE(c.Create(File(1, "before")).ok());
  auto sub = c.Subscribe(1, "", "test");
  REQUIRE(sub.ok());
  auto& stream = *sub;
  Event e;
  REQUIRE(stream->Next(&e));
  CHECK(e.kind() == EVENT_CREATE);
  CHECK(e.name() == "before");
  REQUIRE(c.Create(File(1, "live")).ok());
  REQUIRE(stream->Next(&e));
  CHECK(e.name() == "live");
  CHECK(e.seq() > 1);

  auto prefixed = c.Subscribe(0, "/no/such", "test");
  REQUIRE(prefixed.ok());
  CHECK_FALSE((*prefixed)->Next(&e));
  CHECK(ErrnoOf((*prefixed)->Finish()) == ENOENT);

  bool more = true;
  std::thread waiter([&] {
    Event x;
    more = stream->Next(&x);
  });
  s.reset();  // Shutdown() then server shutdown: the stream ends
  waiter.join();
  CHECK_FALSE(more);
  auto finished = stream->Finish();
  INFO(finished.ToString());
  CHECK(finished.code() == absl::StatusCode::kUnavailable);
}

TEST_CASE("filer rpc: a subscriber with skip_own gets other clients' changes and not its own") {
  Harness h("memory");
  Server s(h.fs.get());
  FilerClient& mine = *s.client;
  FilerClient other("127.0.0.1:" + std::to_string(s.port));
  CHECK(mine.client_id() != 0);
  CHECK(mine.client_id() != other.client_id());
  auto sub = mine.Subscribe(0, "", "test", /*skip_own=*/true);
  REQUIRE(sub.ok());
  // Subscribed "from now": live once the filer has it waiting.
  auto deadline = std::chrono::steady_clock::now() + 20s;
  while (h.fs->events().waiters() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  REQUIRE(h.fs->events().waiters() > 0);
  REQUIRE(mine.Create(File(1, "mine")).ok());
  REQUIRE(other.Create(File(1, "theirs")).ok());
  Event e;
  REQUIRE((*sub)->Next(&e));
  CHECK(e.name() == "theirs");
  CHECK(e.origin() == 0);  // ids are not handed to other clients
  // Its own changes alone: an EVENT_NONE tells how far the stream is (a resumed stream starts
  // there).
  REQUIRE(mine.Create(File(1, "mine2")).ok());
  REQUIRE((*sub)->Next(&e));
  CHECK(e.kind() == EVENT_NONE);
  CHECK(e.seq() == h.fs->events().published());
  (*sub)->Cancel();

  // Without skip_own both come (the store has each one's origin: filer/core/events_test.cc).
  auto all = other.Subscribe(1, "", "test");
  REQUIRE(all.ok());
  REQUIRE((*all)->Next(&e));
  CHECK(e.name() == "mine");
  REQUIRE((*all)->Next(&e));
  CHECK(e.name() == "theirs");
  CHECK(e.origin() == 0);
  (*all)->Cancel();
}

TEST_CASE("filer rpc: an exception in a handler answers INTERNAL and the server lives on") {
  ThrowingCluster cluster;
  kelp::filer::FakeClock clock;
  auto kv = NewMemoryKvStore();
  FilerService core(kv.get(), &cluster, TestOptions(&clock));
  REQUIRE(core.Start().ok());
  {
    Server s(&core);
    auto r = s.client->Assign(kelp::cluster::AssignRequest());
    CHECK(r.status().code() == absl::StatusCode::kInternal);
    CHECK(s.client->GetAttr(1).ok());
  }
  core.Stop();
}

TEST_CASE("filer rpc: one call does what took several: create with O_TRUNC, attributes with the data") {
  Harness h("memory");
  Server s(h.fs.get());
  FilerClient& c = *s.client;
  auto session = c.OpenSession("t");
  REQUIRE(session.ok());
  auto f = c.Create(File(1, "f"));
  REQUIRE(f.ok());
  REQUIRE(c.WriteInline(f->ino(), "hello", 0, false).ok());

  // open(O_CREAT|O_TRUNC) of an existing file: opened and truncated in one call.
  CreateRequest again = File(1, "f");
  again.set_exclusive(false);
  again.set_truncate(true);
  again.set_session(session->session());
  again.set_open_handle(true);
  auto truncated = c.Create(again);
  REQUIRE(truncated.ok());
  CHECK(truncated->ino() == f->ino());
  CHECK(truncated->size() == 0);
  CHECK(c.GetChunks(f->ino())->inline_data().empty());

  // The data and tar's chmod/chown/utimes, in one commit.
  WriteInlineRequest w;
  w.set_ino(f->ino());
  w.set_data("content");
  w.mutable_attrs()->set_valid(SET_ATTR_MODE | SET_ATTR_UID | SET_ATTR_GID | SET_ATTR_MTIME | SET_ATTR_ATIME);
  w.mutable_attrs()->set_mode(0640);
  w.mutable_attrs()->set_uid(1000);
  w.mutable_attrs()->set_gid(100);
  w.mutable_attrs()->set_mtime_ns(1'000'000'000);
  w.mutable_attrs()->set_atime_ns(2'000'000'000);
  auto a = c.WriteInline(w);
  REQUIRE(a.ok());
  CHECK(a->size() == 7);
  CHECK(a->mode() == (S_IFREG | 0640));
  CHECK(a->uid() == 1000);
  CHECK(a->gid() == 100);
  CHECK(a->mtime_ns() == 1'000'000'000);
  CHECK(a->atime_ns() == 2'000'000'000);
  CHECK(c.GetAttr(f->ino())->SerializeAsString() == a->SerializeAsString());

  CommitChunksRequest commit;
  commit.set_ino(f->ino());
  *commit.add_chunks() = MakeChunk(Fid(5), 0, 10000);
  commit.mutable_attrs()->set_valid(SET_ATTR_MODE);
  commit.mutable_attrs()->set_mode(0600);
  auto committed = c.CommitChunks(commit);
  REQUIRE(committed.ok());
  CHECK(committed->attr().size() == 10000);
  CHECK(committed->attr().mode() == (S_IFREG | 0600));

  // The size is truncate's business, never a commit's.
  commit.mutable_attrs()->set_valid(SET_ATTR_SIZE);
  CHECK(ErrnoOf(c.CommitChunks(commit).status()) == EINVAL);
  w.mutable_attrs()->set_valid(SET_ATTR_SIZE);
  CHECK(ErrnoOf(c.WriteInline(w).status()) == EINVAL);
  h.RequireConsistent();
}

// The client remembers which of its mutations a WAL sync covered, so fsync(2) of a file with
// nothing new costs no round trip and no device flush.
