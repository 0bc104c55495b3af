#include "volume/store/compact_map.h"

#include <map>
#include <random>

#include <catch2/catch.hpp>

using namespace kelp::volume;
using Value = CompactMap::Value;

namespace {
// Checks m against a reference map, including the ForEach order.
void CheckSame(const CompactMap& m, const std::map<uint64_t, Value>& ref) {
  REQUIRE(m.entries() == ref.size());
  for (const auto& [k, v] : ref) {
    auto got = m.Get(k);
    REQUIRE(got.has_value());
    REQUIRE(got->offset_units == v.offset_units);
    REQUIRE(got->size == v.size);
  }
  auto it = ref.begin();
  m.ForEach([&](uint64_t k, Value v) {
    REQUIRE(it != ref.end());
    REQUIRE(k == it->first);
    REQUIRE(v.size == it->second.size);
    ++it;
  });
  REQUIRE(it == ref.end());
}
}  // namespace

TEST_CASE("increasing keys append and are found") {
  CompactMap m;
  for (uint64_t k = 1; k <= 10000; ++k)
    REQUIRE_FALSE(m.Set(k * 3, Value{static_cast<uint32_t>(k), 10}).has_value());
  CHECK(m.entries() == 10000);
  CHECK(m.Get(3)->offset_units == 1);
  CHECK(m.Get(30000)->offset_units == 10000);
  CHECK_FALSE(m.Get(4).has_value());
  CHECK_FALSE(m.Get(0).has_value());
  CHECK_FALSE(m.Get(30001).has_value());
}

TEST_CASE("overwrite returns the previous value") {
  CompactMap m;
  m.Set(5, Value{1, 100});
  auto old = m.Set(5, Value{2, 200});
  REQUIRE(old.has_value());
  CHECK(old->offset_units == 1);
  CHECK(m.Get(5)->size == 200);
  CHECK(m.entries() == 1);
}

TEST_CASE("delete leaves a tombstone and reports the live value once") {
  CompactMap m;
  m.Set(1, Value{1, 10});
  m.Set(2, Value{2, 20});
  auto d = m.Delete(1, 9);
  REQUIRE(d.has_value());
  CHECK(d->size == 10);
  CHECK(m.Get(1)->deleted());
  CHECK(m.Get(1)->offset_units == 9);
  CHECK_FALSE(m.Delete(1, 10).has_value());   // already deleted
  CHECK_FALSE(m.Delete(77, 10).has_value());  // never existed
  m.Set(1, Value{3, 30});                     // resurrected by a new write
  CHECK_FALSE(m.Get(1)->deleted());
}

TEST_CASE("out-of-order keys go through the overflow and merge") {
  CompactMap m;
  std::map<uint64_t, Value> ref;
  std::mt19937_64 rng(42);
  // Mostly increasing with a fraction of stragglers, enough to force several merges.
  uint64_t next = 1000000;
  for (uint32_t i = 0; i < 60000; ++i) {
    uint64_t key = (rng() % 4 == 0) ? rng() % next : next++;
    Value v{i, static_cast<uint32_t>(rng() % 5000)};
    m.Set(key, v);
    ref[key] = v;
    if (i % 7 == 0) {
      uint64_t victim = rng() % next;
      auto it = ref.find(victim);
      auto d = m.Delete(victim, i);
      if (it != ref.end() && !it->second.deleted()) {
        REQUIRE(d.has_value());
        REQUIRE(d->size == it->second.size);
      } else {
        REQUIRE_FALSE(d.has_value());
      }
      if (it != ref.end()) it->second = Value{i, format::kTombstoneSize};
    }
  }
  CheckSame(m, ref);
}

TEST_CASE("decreasing keys (the worst case) stay correct") {
  CompactMap m;
  std::map<uint64_t, Value> ref;
  for (uint32_t i = 0; i < 20000; ++i) {
    uint64_t key = 100000 - i;
    m.Set(key, Value{i, i});
    ref[key] = Value{i, i};
  }
  CheckSame(m, ref);
}

TEST_CASE("memory stays under 20 bytes per needle for a million increasing keys") {
  CompactMap m;
  const uint32_t n = 1000000;
  for (uint32_t i = 0; i < n; ++i) m.Set(uint64_t{i} * 2 + 1, Value{i, 1024});
  double per = static_cast<double>(m.MemoryBytes()) / n;
  INFO("bytes per needle: " << per);
  CHECK(per <= 20.0);
  CHECK(m.Get(1999999)->offset_units == 999999);
}
