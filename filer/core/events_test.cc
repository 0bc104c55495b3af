#include <sys/stat.h>

#include <thread>

#include "filer/core/test_util.h"
#include "filer/store/keys.h"
#include "shared/rpc/caller.h"

using namespace kelp::filer;
using namespace kelp::filer::testing;
using namespace std::chrono_literals;

namespace {

// Until a thread is parked in the log's wait (at most 20 s).
bool Parked(EventLog& log) {
  auto deadline = std::chrono::steady_clock::now() + 20s;
  while (log.waiters() == 0) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

}  // namespace

TEST_CASE("every mutation emits an event, in order") {
  Harness h(KELP_BACKENDS);
  auto sub = h.fs->Subscribe(0, "");
  REQUIRE(sub.ok());
  uint64_t d = h.Mkdir(1, "d");
  uint64_t f = h.Mkfile(d, "f");
  REQUIRE(h.fs->Rename(d, "f", 1, "g", 0).ok());
  SetAttrRequest sa;
  sa.set_ino(f);
  sa.set_valid(SET_ATTR_MODE);
  sa.set_mode(0600);
  REQUIRE(h.fs->SetAttr(sa).ok());
  CommitChunksRequest c;
  c.set_ino(f);
  *c.add_chunks() = MakeChunk(Fid(1), 0, 5);
  REQUIRE(h.fs->CommitChunks(c).ok());
  REQUIRE(h.fs->SetXattr(f, "user.x", "1", 0).ok());
  REQUIRE(h.fs->Link(f, d, "h").ok());
  REQUIRE(h.fs->Unlink(1, "g").ok());
  REQUIRE(h.fs->Unlink(d, "h").ok());
  REQUIRE(h.fs->Rmdir(1, "d").ok());

  auto ev = Drain(**sub);
  std::vector<EventKind> kinds;
  for (const auto& e : ev) kinds.push_back(e.kind());
  CHECK(kinds == std::vector<EventKind>{EVENT_CREATE, EVENT_CREATE, EVENT_RENAME, EVENT_ATTR,
                                        EVENT_DATA, EVENT_XATTR, EVENT_CREATE, EVENT_DELETE,
                                        EVENT_DELETE, EVENT_DELETE});
  for (size_t i = 1; i < ev.size(); ++i) CHECK(ev[i].seq() > ev[i - 1].seq());
  CHECK(ev[0].ino() == d);
  CHECK(ev[0].name() == "d");
  CHECK(ev[0].parent() == 1);
  CHECK(S_ISDIR(ev[0].attr().mode()));
  CHECK(ev[2].parent() == d);
  CHECK(ev[2].name() == "f");
  CHECK(ev[2].new_parent() == 1);
  CHECK(ev[2].new_name() == "g");
  CHECK(ev[3].attr().mode() == (S_IFREG | 0600));
  CHECK(ev[4].attr().size() == 5);
  CHECK(ev[8].attr().nlink() == 0);
  CHECK(ev[0].time_ns() == h.clock.WallNs());

  // Replay from a given seq.
  auto replay = h.fs->Subscribe(ev[5].seq(), "");
  auto again = Drain(**replay);
  REQUIRE(again.size() == 5);
  CHECK(again[0].seq() == ev[5].seq());
}

TEST_CASE("a waiting subscriber wakes up for a live event") {
  Harness h(KELP_BACKENDS);
  auto sub = h.fs->Subscribe(0, "");
  REQUIRE(sub.ok());
  CHECK((*sub)->Next(10, 1ms)->empty());
  // Catch2 is not thread-safe: threads record results, the test thread checks them.
  absl::StatusOr<std::vector<Event>> got;
  std::thread reader([&] { got = (*sub)->Next(10, 20s); });
  CHECK(Parked(h.fs->events()));  // the event comes while it waits, not before
  h.Mkfile(1, "live");
  reader.join();
  REQUIRE(got.ok());
  REQUIRE(got->size() == 1);
  CHECK((*got)[0].name() == "live");

  // Stop ends every subscription, a waiting one at once (not when its wait runs out).
  absl::Status ended;
  std::thread waiter([&] { ended = (*sub)->Next(10, 60s).status(); });
  CHECK(Parked(h.fs->events()));
  auto stop = std::chrono::steady_clock::now();
  h.fs->Stop();
  waiter.join();
  CHECK(ended.code() == absl::StatusCode::kUnavailable);
  CHECK(std::chrono::steady_clock::now() - stop < 30s);
}

TEST_CASE(
    "a subscriber that skips one origin gets the others' events and is not woken by its own") {
  Harness h(KELP_BACKENDS);
  auto sub = h.fs->Subscribe(0, "", /*skip_origin=*/7);
  REQUIRE(sub.ok());
  auto make_as = [&](uint64_t caller, const std::string& name) {
    kelp::rpc::ScopedCallerId as(caller);
    h.Mkfile(1, name);
  };
  make_as(7, "mine");
  make_as(8, "theirs");
  make_as(0, "filers");  // outside any call: the filer's own work, origin 0
  auto got = (*sub)->Next(10, 1s);
  REQUIRE(got.ok());
  REQUIRE(got->size() == 2);
  CHECK((*got)[0].name() == "theirs");
  CHECK((*got)[0].origin() == 8);
  CHECK((*got)[1].name() == "filers");
  CHECK((*got)[1].origin() == 0);

  // Its own changes alone leave it waiting, past them (on a store of its own the log knows
  // the stretch holds nothing else; a shared store's other filers could have written there).
  absl::StatusOr<std::vector<Event>> later;
  std::thread reader([&] { later = (*sub)->Next(10, 20s); });
  CHECK(Parked(h.fs->events()));
  make_as(7, "mine2");
  make_as(7, "mine3");
  auto [published, foreign] = h.fs->events().Visible(7);
  if (!h.kv->shared()) CHECK(foreign < published);
  CHECK(h.fs->events().Visible(0).second == published);
  make_as(9, "theirs2");
  reader.join();
  REQUIRE(later.ok());
  REQUIRE(later->size() == 1);
  CHECK((*later)[0].name() == "theirs2");

  // A subscriber without a skip gets all of them, each with its origin.
  auto all = h.fs->Subscribe(1, "");
  REQUIRE(all.ok());
  auto every = (*all)->Next(100, 1s);
  REQUIRE(every.ok());
  std::vector<std::pair<std::string, uint64_t>> names;
  for (const Event& e : *every) {
    if (e.kind() == EVENT_CREATE) names.emplace_back(e.name(), e.origin());
  }
  CHECK(names ==
        std::vector<std::pair<std::string, uint64_t>>{
            {"mine", 7}, {"theirs", 8}, {"filers", 0}, {"mine2", 7}, {"mine3", 7}, {"theirs2", 9}});
}

TEST_CASE("retention: a subscriber behind the floor gets EVENT_RESET") {
  Harness h(KELP_BACKENDS, [](FilerOptions& o) { o.event_retention_count = 10; });
  auto early = h.fs->Subscribe(1, "");
  REQUIRE(early.ok());
  CHECK(Drain(**early).size() == 0);  // nothing happened yet
  for (int i = 0; i < 30; ++i) h.Mkfile(1, "f" + std::to_string(i));
  auto first = (*early)->Next(5, 0ms);  // reads 5 of 30
  REQUIRE(first->size() == 5);
  h.fs->RunMaintenance();  // trims to the last 10
  uint64_t floor = h.fs->events().floor();
  CHECK(floor > 6);

  auto r = (*early)->Next(100, 0ms);
  REQUIRE(r.ok());
  REQUIRE(r->size() == 1);
  CHECK((*r)[0].kind() == EVENT_RESET);
  CHECK((*r)[0].seq() == floor - 1);
  auto rest = Drain(**early);
  REQUIRE(rest.size() == 10);
  CHECK(rest[0].seq() == floor);

  auto late = h.fs->Subscribe(2, "");
  auto l = (*late)->Next(100, 0ms);
  CHECK((*l)[0].kind() == EVENT_RESET);
  auto future = h.fs->Subscribe(1'000'000, "");
  CHECK((*future)->Next(100, 0ms)->at(0).kind() == EVENT_RESET);
  h.Mkfile(1, "after");
  auto f = Drain(**future);
  REQUIRE(f.size() == 1);
  CHECK(f[0].name() == "after");
}

TEST_CASE("a trim that failed to commit leaves no event below the floor once the next one does") {
  Harness h(KELP_BACKENDS, [](FilerOptions& o) { o.event_retention_count = 10; });
  for (int i = 0; i < 30; ++i) h.Mkfile(1, "a" + std::to_string(i));
  // The trim's batch (it writes the floor) fails, as a conflict with another filer's trim or
  // a full disk would make it.
  const std::string floor_key = keys::MetaKey(keys::kEventFloorName);
  h.counting->SetFailCommit([&](const WriteBatch& b) {
    for (const auto& op : b.ops()) {
      if (op.key == floor_key) return absl::AbortedError("conflict");
    }
    return absl::OkStatus();
  });
  h.fs->RunMaintenance();
  CHECK(h.fs->events().floor() == 1);  // nothing trimmed: the floor stays
  h.counting->SetFailCommit(nullptr);
  for (int i = 0; i < 30; ++i) h.Mkfile(1, "b" + std::to_string(i));
  h.fs->RunMaintenance();
  uint64_t floor = h.fs->events().floor();
  CHECK(floor > 40);
  // Every event below the floor went with the trim (fsck checks that too).
  auto it = h.kv->Scan(keys::EventKey(0), keys::EventKey(floor), 100);
  CHECK_FALSE(it->Valid());
  h.RequireConsistent();
}

TEST_CASE("retention by age") {
  Harness h(KELP_BACKENDS, [](FilerOptions& o) { o.event_retention_age = std::chrono::milliseconds(60'000); });
  h.Mkfile(1, "old");
  h.clock.Advance(120s);
  h.Mkfile(1, "new");
  h.fs->RunMaintenance();
  auto sub = h.fs->Subscribe(1, "");
  auto ev = Drain(**sub);
  REQUIRE(ev.size() == 2);
  CHECK(ev[0].kind() == EVENT_RESET);
  CHECK(ev[1].name() == "new");
}

TEST_CASE("path prefix limits events to a subtree") {
  Harness h(KELP_BACKENDS);
  uint64_t a = h.Mkdir(1, "a");
  uint64_t b = h.Mkdir(1, "b");
  uint64_t deep = h.Mkdir(a, "deep");
  CHECK(Err(h.fs->Subscribe(0, "/nope")) == ENOENT);
  h.Mkfile(1, "file");
  CHECK(Err(h.fs->Subscribe(0, "/file")) == ENOTDIR);
  auto sub = h.fs->Subscribe(0, "/a");
  REQUIRE(sub.ok());
  h.Mkfile(deep, "in");      // yes
  h.Mkfile(b, "out");        // no
  REQUIRE(h.fs->Rename(b, "out", a, "moved", 0).ok());  // yes: lands in /a
  uint64_t moved = h.fs->Lookup(a, "moved")->ino();
  SetAttrRequest sa;
  sa.set_ino(moved);
  sa.set_valid(SET_ATTR_UID);
  REQUIRE(h.fs->SetAttr(sa).ok());                       // yes: its parent is /a
  sa.set_ino(b);
  REQUIRE(h.fs->SetAttr(sa).ok());                       // no
  sa.set_ino(a);
  REQUIRE(h.fs->SetAttr(sa).ok());                       // yes: the prefix itself
  auto ev = Drain(**sub);
  std::vector<std::string> what;
  for (const auto& e : ev) what.push_back(std::to_string(e.kind()) + ":" + e.name() + e.new_name());
  CHECK(what == std::vector<std::string>{"1:in", "3:outmoved", "4:", "4:"});
}
