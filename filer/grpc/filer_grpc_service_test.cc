// End to end: FilerService behind FilerGrpcService on a real gRPC server on 127.0.0.1:0,
// driven through FilerClient, so statuses and errnos cross the wire both ways.
#include "filer/grpc/filer_grpc_service.h"

#include <sys/stat.h>

#include <set>
#include <thread>

#include "filer/client/filer_client.h"
#include "filer/client/limits.h"
#include "filer/core/test_util.h"
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

struct Server {
  explicit Server(FilerService* core) : svc(core) {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    b.RegisterService(&svc);
    server = b.BuildAndStart();
    REQUIRE(server);
    REQUIRE(port > 0);
    client = FilerClient::Connect("127.0.0.1:" + std::to_string(port));
  }
  ~Server() {
    svc.Shutdown();
    server->Shutdown(std::chrono::system_clock::now() + 5s);
  }
  FilerGrpcService svc;
  int port = 0;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<FilerClient> client;
};

CreateRequest File(uint64_t parent, const std::string& name) {
  CreateRequest r;
  r.set_parent(parent);
  r.set_name(name);
  r.set_mode(S_IFREG | 0644);
  r.set_exclusive(true);
  return r;
}

}  // namespace

TEST_CASE("grpc: namespace operations, and errno travels back") {
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
TEST_CASE("grpc: namespace replies carry the directory's attributes after the change") {
  Harness h(KELP_BACKENDS);
  Server s(h.fs.get());
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(s.port), grpc::InsecureChannelCredentials());
  auto stub = Filer::NewStub(channel);
  auto call = [&](auto method, const auto& req, auto* resp) {
    grpc::ClientContext ctx;
    return ((*stub).*method)(&ctx, req, resp).ok();
  };
  uint64_t d = h.Mkdir(1, "d");
  uint64_t e = h.Mkdir(1, "e");
  uint64_t before = h.fs->GetAttr(d)->version();

  AttrResponse created;
  REQUIRE(call(&Filer::Stub::Create, File(d, "f"), &created));
  CHECK(created.parent_attr().ino() == d);
  CHECK(created.parent_attr().version() > before);
  CHECK(created.parent_attr().mtime_ns() == h.fs->GetAttr(d)->mtime_ns());

  CreateRequest sub = File(d, "sub");
  sub.set_mode(S_IFDIR | 0755);
  AttrResponse mk;
  REQUIRE(call(&Filer::Stub::Create, sub, &mk));
  CHECK(mk.parent_attr().nlink() == 3);

  SymlinkRequest sl;
  sl.set_parent(d);
  sl.set_name("l");
  sl.set_target("f");
  AttrResponse linked;
  REQUIRE(call(&Filer::Stub::Symlink, sl, &linked));
  CHECK(linked.parent_attr().ino() == d);

  LinkRequest hl;
  hl.set_ino(created.attr().ino());
  hl.set_new_parent(e);
  hl.set_new_name("f2");
  AttrResponse hard;
  REQUIRE(call(&Filer::Stub::Link, hl, &hard));
  CHECK(hard.parent_attr().ino() == e);

  RenameRequest rn;
  rn.set_parent(d);
  rn.set_name("f");
  rn.set_new_parent(e);
  rn.set_new_name("g");
  RenameResponse renamed;
  REQUIRE(call(&Filer::Stub::Rename, rn, &renamed));
  CHECK(renamed.parent_attr().ino() == d);
  CHECK(renamed.new_parent_attr().ino() == e);

  UnlinkRequest ul;
  ul.set_parent(e);
  ul.set_name("g");
  UnlinkResponse unlinked;
  REQUIRE(call(&Filer::Stub::Unlink, ul, &unlinked));
  CHECK(unlinked.parent_attr().ino() == e);
  CHECK(unlinked.parent_attr().version() == h.fs->GetAttr(e)->version());

  UnlinkRequest rd;
  rd.set_parent(d);
  rd.set_name("sub");
  RmdirResponse removed;
  REQUIRE(call(&Filer::Stub::Rmdir, rd, &removed));
  CHECK(removed.parent_attr().ino() == d);
  CHECK(removed.parent_attr().nlink() == 2);

  // A failed change carries nothing.
  AttrResponse dup;
  CHECK_FALSE(call(&Filer::Stub::Create, File(d, "l"), &dup));
  CHECK(dup.parent_attr().ino() == 0);
}

TEST_CASE("grpc: readdir streams a big directory in batches with stable cookies") {
  Harness h("memory");
  Server s(h.fs.get());
  FilerClient& c = *s.client;
  uint64_t d = c.Mkdir(1, "big", 0755, 0, 0)->ino();
  const int n = 3000;
  for (int i = 0; i < n; ++i) REQUIRE(c.Create(File(d, "e" + std::to_string(i))).ok());
  std::set<std::string> seen;
  uint64_t last = 0;
  REQUIRE(c.ReadDir(d, 0, 0, true, [&](const DirEntry& e) {
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
    REQUIRE(c.ReadDir(d, cookie, 700, false, [&](const DirEntry& e) {
               CHECK(seen.insert(e.name()).second);
               cookie = e.cookie();
               ++got;
               return true;
             }).ok());
    if (got == 0) break;
  }
  CHECK(seen.size() == n);
  int calls = 0;
  REQUIRE(c.ReadDir(d, 0, 0, false, [&](const DirEntry&) { return ++calls < 10; }).ok());
  CHECK(calls == 10);
  CHECK(ErrnoOf(c.ReadDir(424242, 0, 0, false, [](const DirEntry&) { return true; })) == ENOENT);
  CHECK(ErrnoOf(c.ReadDir(c.Lookup(d, "e1")->ino(), 0, 0, false,
                          [](const DirEntry&) { return true; })) == ENOTDIR);
}

TEST_CASE("grpc: chunks, inline data, sessions, statfs and cluster pass-through") {
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
  REQUIRE(c.Release(session->session(), f->ino()).ok());
  CHECK(ErrnoOf(c.GetAttr(f->ino()).status()) == ENOENT);
  CHECK(h.GcFids().size() == 2);
  CHECK(c.KeepAlive("never-opened").code() == absl::StatusCode::kNotFound);
  REQUIRE(c.KeepAlive("reattached", {small->ino()}, true).ok());
  REQUIRE(c.Open("reattached", small->ino()).ok());

  auto st = c.StatFs();
  REQUIRE(st.ok());
  CHECK(st->name_max() == 255);
  CHECK(st->total_files() - st->free_files() == 2);
}

TEST_CASE("grpc: subscribe streams history, then live events, and ends on shutdown") {
  Harness h("memory");
  auto s = std::make_unique<Server>(h.fs.get());
  FilerClient& c = *s->client;
  REQUIRE(c.Create(File(1, "before")).ok());
  auto stream = c.Subscribe(1, "", "test");
  Event e;
  REQUIRE(stream->Next(&e));
  CHECK(e.kind() == EVENT_CREATE);
  CHECK(e.name() == "before");
  REQUIRE(c.Create(File(1, "live")).ok());
  REQUIRE(stream->Next(&e));
  CHECK(e.name() == "live");
  CHECK(e.seq() > 1);

  auto prefixed = c.Subscribe(0, "/no/such", "test");
  CHECK_FALSE(prefixed->Next(&e));
  CHECK(ErrnoOf(prefixed->Finish()) == ENOENT);

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

TEST_CASE("grpc: an exception in a handler answers INTERNAL and the server lives on") {
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
