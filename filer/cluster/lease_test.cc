#include "filer/cluster/lease.h"

#include <atomic>

#include <catch2/catch.hpp>

using namespace kelp::filer;

namespace {

// Both filers see the same wall clock; each has its own monotonic one (tests move them).
struct Clocks {
  // Real time to start with: CheckNoFilerRunning reads the real clock.
  std::atomic<int64_t> wall{std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count()};
  std::atomic<int64_t> mono_a{1000}, mono_b{1000};
  void Advance(int64_t ms) {
    wall += ms;
    mono_a += ms;
    mono_b += ms;
  }
};

CoordinatorLease::Options Opts(const std::string& id, Clocks& c, std::atomic<int64_t>& mono,
                               std::vector<bool>* changes = nullptr) {
  CoordinatorLease::Options o;
  o.id = id;
  o.grpc_address = id + ":grpc";
  o.http_address = id + ":http";
  o.lease = std::chrono::milliseconds(6000);
  o.wall_ms = [&c] { return c.wall.load(); };
  o.mono_ms = [&mono] { return mono.load(); };
  o.capacity = [] { return std::make_pair<uint64_t, uint64_t>(100, 40); };
  if (changes) o.on_change = [changes](bool h) { changes->push_back(h); };
  return o;
}

}  // namespace

TEST_CASE("one filer holds the coordinator lease, another takes it over once it runs out") {
  auto kv = NewMemoryKvStore(true);
  Clocks c;
  std::vector<bool> a_changes;
  CoordinatorLease a(kv.get(), Opts("a", c, c.mono_a, &a_changes));
  CoordinatorLease b(kv.get(), Opts("b", c, c.mono_b));
  REQUIRE(a.RunOnce().ok());
  REQUIRE(b.RunOnce().ok());
  CHECK(a.IsHolder());
  CHECK_FALSE(b.IsHolder());
  REQUIRE(b.holder());
  CHECK(b.holder()->id == "a");
  CHECK(b.holder()->grpc_address == "a:grpc");
  CHECK(b.holder()->total_bytes == 100);
  CHECK(a_changes == std::vector<bool>{true});

  // Renewals keep it.
  for (int i = 0; i < 5; ++i) {
    c.Advance(2000);
    REQUIRE(a.RunOnce().ok());
    REQUIRE(b.RunOnce().ok());
    CHECK(a.IsHolder());
    CHECK_FALSE(b.IsHolder());
  }
  uint64_t epoch = b.holder()->epoch;

  // a stops renewing (it died, or cannot reach the store): it stops calling itself holder a
  // quarter of the lease before the expiry it wrote; b takes over only after that expiry.
  c.Advance(4600);
  CHECK_FALSE(a.IsHolder());
  REQUIRE(b.RunOnce().ok());
  CHECK_FALSE(b.IsHolder());
  c.Advance(1500);
  REQUIRE(b.RunOnce().ok());
  CHECK(b.IsHolder());
  CHECK(b.holder()->epoch == epoch + 1);
  // a comes back: it does not take it back.
  REQUIRE(a.RunOnce().ok());
  CHECK_FALSE(a.IsHolder());
  CHECK(a.holder()->id == "b");
  CHECK(a_changes == std::vector<bool>{true, false});
}

TEST_CASE("a coordinator that stops releases the lease at once") {
  auto kv = NewMemoryKvStore(true);
  Clocks c;
  CoordinatorLease b(kv.get(), Opts("b", c, c.mono_b));
  {
    CoordinatorLease a(kv.get(), Opts("a", c, c.mono_a));
    REQUIRE(a.Start().ok());
    CHECK(a.IsHolder());
    REQUIRE(b.RunOnce().ok());
    CHECK_FALSE(b.IsHolder());
    CHECK_FALSE(CoordinatorLease::CheckNoFilerRunning(*kv).ok());
    a.Stop();
  }
  REQUIRE(b.RunOnce().ok());
  CHECK(b.IsHolder());
}

TEST_CASE("on a store only one process opens, the filer is always the coordinator and writes nothing") {
  auto kv = NewMemoryKvStore(false);
  Clocks c;
  CoordinatorLease a(kv.get(), Opts("a", c, c.mono_a));
  REQUIRE(a.Start().ok());
  CHECK(a.IsHolder());
  c.Advance(60'000);
  CHECK(a.IsHolder());
  CHECK(kv->Scan("", "")->Valid() == false);
  CHECK(CoordinatorLease::CheckNoFilerRunning(*kv).ok());
}
