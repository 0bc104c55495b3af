// FilerClient against a real filer transport (filer/rpc/rpc_test_server.h): how it groups
// synced commits, when an Fsync is owed, and how it moves between several filers.
#include "filer/client/filer_client.h"

#include <sys/stat.h>

#include <atomic>
#include <thread>

#include "filer/core/test_util.h"
#include "filer/rpc/rpc_test_server.h"
#include "shared/status.h"

using namespace kelp::filer;
using namespace kelp::filer::testing;
using kelp::ErrnoOf;
using namespace std::chrono_literals;

TEST_CASE("filer client: synced commits from many threads go together in batches and each is applied once") {
  Harness h(KELP_BACKENDS);
  Server s(h.fs.get());
  FilerClient& c = *s.client;
  // More threads than a batch holds (64): the ones that did not fit go in a batch of their own.
  constexpr int kThreads = 72;
  constexpr int kCommits = 10;
  std::vector<uint64_t> inos;
  for (int t = 0; t < kThreads; ++t) {
    auto f = c.Create(File(1, "f" + std::to_string(t)));
    REQUIRE(f.ok());
    inos.push_back(f->ino());
  }
  std::atomic<int> failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCommits; ++i) {
        CommitChunksRequest req;
        req.set_ino(inos[t]);
        Chunk* ch = req.add_chunks();
        ch->set_offset(i * 10);
        ch->set_size(10);
        ch->set_data(std::string(10, static_cast<char>('a' + i)));
        req.set_sync(true);
        auto r = c.CommitChunks(req);
        // Each thread's commits of its file are in order: the size grows by 10 each time.
        if (!r.ok() || r->attr().size() != static_cast<uint64_t>(i + 1) * 10 || r->seqs_size() != 1) ++failed;
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(failed.load() == 0);
  for (int t = 0; t < kThreads; ++t) {
    auto chunks = c.GetChunks(inos[t]);
    REQUIRE(chunks.ok());
    CHECK(chunks->attr().size() == kCommits * 10);
    CHECK(chunks->chunks_size() == kCommits);  // each commit applied exactly once
  }
  // 720 commits, one call out at a time: the waiting ones went together.
  const uint64_t calls = c.calls(FilerMethod::kCommitChunks) + c.calls(FilerMethod::kCommitBatch);
  CHECK(c.calls(FilerMethod::kCommitBatch) > 0);
  CHECK(calls < static_cast<uint64_t>(kThreads * kCommits));
  CHECK_FALSE(c.SyncOwed());
}

TEST_CASE("filer client: a filer without CommitBatch gets the waiting commits one by one") {
  // A filer older than method 29: it serves CommitChunks only, and answers CommitBatch
  // UNIMPLEMENTED (nothing applied), so the client sends what a batch would have carried singly.
  Harness h("memory");
  kelp::rpc::Service old;
  old.AddUnary<CommitChunksRequest, CommitChunksResponse>(
      MethodNumber(FilerMethod::kCommitChunks), "CommitChunks",
      [&](const CommitChunksRequest& req, CommitChunksResponse* resp) -> absl::Status {
        ASSIGN_OR_RETURN(*resp, h.fs->CommitChunks(req));
        return absl::OkStatus();
      },
      [](const CommitChunksRequest&) { return kelp::rpc::Exec::kWorker; });
  kelp::rpc::Server::Options o;
  o.loop_threads = 1;
  kelp::rpc::Server server(o, &old);
  REQUIRE(server.Start().ok());
  auto port = server.Listen("127.0.0.1", 0);
  REQUIRE(port.ok());
  FilerClient c("127.0.0.1:" + std::to_string(*port));
  constexpr int kThreads = 8;
  std::vector<uint64_t> inos;
  for (int t = 0; t < kThreads; ++t) {
    inos.push_back(h.Mkfile(1, "f" + std::to_string(t)));
  }
  std::atomic<int> failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i) {
        CommitChunksRequest req;
        req.set_ino(inos[t]);
        Chunk* ch = req.add_chunks();
        ch->set_offset(i * 4);
        ch->set_size(4);
        ch->set_data("abcd");
        req.set_sync(true);
        if (!c.CommitChunks(req).ok()) ++failed;
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(failed.load() == 0);
  for (uint64_t ino : inos) {
    auto chunks = h.fs->GetChunks(ino);
    REQUIRE(chunks.ok());
    CHECK(chunks->chunks_size() == 10);  // every commit applied once, none lost to the refusal
    CHECK(chunks->attr().size() == 40);
  }
  CHECK(c.calls(FilerMethod::kCommitChunks) == kThreads * 10);
  // Refused once for each batch out when the first refusal came back (one at a time, so
  // once; at most two if more were ever let out), then never sent again.
  CHECK(c.calls(FilerMethod::kCommitBatch) <= 2);
  server.Stop();
}

TEST_CASE("filer client: Fsync reaches the filer only when a mutation is not yet covered by a WAL sync") {
  Harness h("memory");
  Server s(h.fs.get());
  FilerClient& c = *s.client;
  // Nothing changed yet: nothing to sync.
  REQUIRE(c.Fsync(1).ok());
  CHECK(c.fsyncs_sent() == 0);
  CHECK(c.fsyncs_skipped() == 1);

  auto a = c.Create(File(1, "a"));
  REQUIRE(a.ok());
  REQUIRE(c.SyncOwed());
  REQUIRE(c.Fsync(a->ino()).ok());
  CHECK(c.fsyncs_sent() == 1);
  REQUIRE(c.Fsync(a->ino()).ok());  // nothing new
  CHECK(c.fsyncs_sent() == 1);

  // Reads owe nothing; every kind of change does.
  REQUIRE(c.GetAttr(a->ino()).ok());
  REQUIRE(c.Lookup(1, "a").ok());
  CHECK_FALSE(c.SyncOwed());
  SetAttrRequest sa;
  sa.set_ino(a->ino());
  sa.set_mode(0600);
  sa.set_valid(SET_ATTR_MODE);
  REQUIRE(c.SetAttr(sa).ok());
  CHECK(c.SyncOwed());
  REQUIRE(c.Fsync(a->ino()).ok());
  CHECK(c.fsyncs_sent() == 2);
  REQUIRE(c.SetXattr(a->ino(), "user.k", "v", 0).ok());
  CHECK(c.SyncOwed());
  REQUIRE(c.Fsync(a->ino()).ok());
  // A failed mutation may still have been applied: it is owed too.
  REQUIRE_FALSE(c.Unlink(1, "no-such-name").ok());
  CHECK(c.SyncOwed());
  REQUIRE(c.Fsync(a->ino()).ok());
  CHECK(c.fsyncs_sent() == 4);
}

TEST_CASE("filer client: a failed Fsync leaves the sync owed and the client reconnects") {
  Harness h("memory");
  Server s(h.fs.get());
  FilerClient& c = *s.client;
  REQUIRE(c.Create(File(1, "a")).ok());
  s.Down();
  CHECK(c.Fsync(1).code() == absl::StatusCode::kUnavailable);
  s.Up();
  CHECK(c.SyncOwed());
  REQUIRE(c.Fsync(1).ok());
  CHECK(c.fsyncs_sent() == 2);
  CHECK_FALSE(c.SyncOwed());
}

TEST_CASE("filer client: a synced commit covers the mutations before it, an unsynced one is owed") {
  Harness h("memory");
  Server s(h.fs.get());
  FilerClient& c = *s.client;
  auto a = c.Create(File(1, "a"));
  REQUIRE(a.ok());
  CommitChunksRequest req;
  req.set_ino(a->ino());
  *req.add_chunks() = MakeChunk(Fid(7), 0, 10);
  req.set_min_size(10);
  req.set_sync(true);
  REQUIRE(c.CommitChunks(req).ok());
  CHECK_FALSE(c.SyncOwed());
  req.set_sync(false);
  REQUIRE(c.CommitChunks(req).ok());
  CHECK(c.SyncOwed());
  REQUIRE(c.WriteInline(a->ino(), "hello", 1, true).ok());
  CHECK_FALSE(c.SyncOwed());
  REQUIRE(c.WriteInline(a->ino(), "hello", 1, false).ok());
  CHECK(c.SyncOwed());
  CHECK(c.fsyncs_sent() == 0);
}

TEST_CASE("filer client: with several filers it moves to the next when one goes away, and stays there") {
  Harness h("memory");
  // Two filers over one namespace (as two filers over one store).
  Server a(h.fs.get()), b(h.fs.get());
  const std::string addr_a = "127.0.0.1:" + std::to_string(a.port);
  const std::string addr_b = "127.0.0.1:" + std::to_string(b.port);
  FilerClient c(addr_a + "," + addr_b);
  REQUIRE(c.Connect(3s).ok());
  CHECK(c.filer() == addr_a);
  auto one = c.Create(File(1, "one"));
  REQUIRE(one.ok());
  CHECK(c.failovers() == 0);

  // The filer closes the connection as it goes: the next call, a mutation, is not sent into
  // it but to the other filer, and succeeds.
  a.Down();
  auto two = c.Create(File(1, "two"));
  REQUIRE(two.ok());
  CHECK(c.filer() == addr_b);
  CHECK(c.failovers() == 1);
  CHECK(c.Lookup(1, "one")->ino() == one->ino());

  // It stays where it is when the first comes back, and events stream from there.
  a.Up();
  REQUIRE(c.Create(File(1, "three")).ok());
  CHECK(c.filer() == addr_b);
  auto sub = c.Subscribe(1, "", "test");
  REQUIRE(sub.ok());
  Event e;
  REQUIRE((*sub)->Next(&e));
  CHECK(e.name() == "one");
  (*sub)->Cancel();

  // That one goes: a read moves back to the first, and so does a subscription.
  b.Down();
  auto attr = c.GetAttr(two->ino());
  REQUIRE(attr.ok());
  CHECK(c.filer() == addr_a);
  CHECK(c.failovers() == 2);
  b.Up();
  a.Down();
  auto again = c.Subscribe(1, "", "test");
  REQUIRE(again.ok());
  CHECK(c.filer() == addr_b);
  REQUIRE((*again)->Next(&e));
  CHECK(e.name() == "one");
  (*again)->Cancel();

  // None left: UNAVAILABLE, and a new client's Connect names every filer it tried.
  b.Down();
  CHECK(c.Lookup(1, "one").status().code() == absl::StatusCode::kUnavailable);
  FilerClient d(addr_a + "," + addr_b);
  absl::Status s = d.Connect(1s);
  CHECK(s.code() == absl::StatusCode::kUnavailable);
  CHECK(s.message().find(addr_a) != std::string_view::npos);
  CHECK(s.message().find(addr_b) != std::string_view::npos);
}

TEST_CASE("filer client: a filer of the list that is not there at the start is passed over") {
  Harness h("memory");
  Server a(h.fs.get()), b(h.fs.get());
  const std::string addr_a = "127.0.0.1:" + std::to_string(a.port);
  const std::string addr_b = "127.0.0.1:" + std::to_string(b.port);
  a.Down();
  FilerClient c(addr_a + "," + addr_b);
  REQUIRE(c.Connect(3s).ok());
  CHECK(c.filer() == addr_b);
  REQUIRE(c.Create(File(1, "x")).ok());
  // One address is the single-filer client of before: no failover, the address as given.
  FilerClient single(addr_b);
  CHECK(single.filer() == addr_b);
  REQUIRE(single.Lookup(1, "x").ok());
  CHECK(single.failovers() == 0);
}
