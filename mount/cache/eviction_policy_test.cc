#include "mount/cache/eviction_policy.h"

#include <catch2/catch.hpp>

#include <set>

namespace kelp::mount::cache {
namespace {

std::vector<uint64_t> Drain(EvictionPolicy& p) {
  std::vector<uint64_t> out;
  while (auto k = p.Evict()) out.push_back(*k);
  return out;
}

// Simulates a cache of `capacity` unit-size entries and returns its hits for a trace.
size_t Hits(EvictionKind kind, size_t capacity, const std::vector<uint64_t>& trace) {
  auto p = MakeEvictionPolicy(kind);
  std::set<uint64_t> cached;
  size_t hits = 0;
  for (uint64_t k : trace) {
    if (cached.count(k)) {
      ++hits;
      p->Touch(k);
      continue;
    }
    while (cached.size() >= capacity) cached.erase(*p->Evict());
    p->Add(k, 1);
    cached.insert(k);
  }
  return hits;
}

}  // namespace

TEST_CASE("LRU evicts the least recently used entry, FIFO ignores hits") {
  auto lru = MakeEvictionPolicy(EvictionKind::kLru);
  auto fifo = MakeEvictionPolicy(EvictionKind::kFifo);
  for (auto* p : {lru.get(), fifo.get()}) {
    for (uint64_t k = 1; k <= 4; ++k) p->Add(k, 10);
    p->Touch(1);
    CHECK(p->bytes() == 40);
    CHECK(p->size() == 4);
  }
  CHECK(Drain(*lru) == std::vector<uint64_t>{2, 3, 4, 1});
  CHECK(Drain(*fifo) == std::vector<uint64_t>{1, 2, 3, 4});
  CHECK(lru->bytes() == 0);
}

TEST_CASE("Erase forgets an entry without evicting it") {
  for (EvictionKind kind : {EvictionKind::kS3Fifo, EvictionKind::kLru, EvictionKind::kFifo}) {
    auto p = MakeEvictionPolicy(kind);
    p->Add(1, 5);
    p->Add(2, 7);
    p->Erase(1);
    p->Erase(99);  // unknown: ignored
    CHECK(p->bytes() == 7);
    CHECK(Drain(*p) == std::vector<uint64_t>{2});
    CHECK_FALSE(p->Evict());
  }
}

TEST_CASE("S3-FIFO evicts one-hit entries before reused ones") {
  auto p = MakeEvictionPolicy(EvictionKind::kS3Fifo);
  for (uint64_t k = 1; k <= 10; ++k) p->Add(k, 1);
  p->Touch(1);
  p->Touch(2);
  std::vector<uint64_t> order = Drain(*p);
  REQUIRE(order.size() == 10);
  // 1 and 2 were promoted to the main queue, so everything else goes first.
  CHECK(std::set<uint64_t>(order.end() - 2, order.end()) == std::set<uint64_t>{1, 2});
}

TEST_CASE("S3-FIFO readmits a recently evicted key straight into the main queue") {
  auto p = MakeEvictionPolicy(EvictionKind::kS3Fifo);
  for (uint64_t k = 1; k <= 20; ++k) p->Add(k, 1);
  CHECK(*p->Evict() == 1);  // not reused: leaves through probation, remembered as a ghost
  p->Add(1, 1);             // back: into main
  for (uint64_t k = 21; k <= 30; ++k) p->Add(k, 1);
  // Evicting all the never-reused probation entries must not reach key 1 first.
  for (int i = 0; i < 19; ++i) CHECK(*p->Evict() != 1);
}

TEST_CASE("a hot set survives a one-pass scan under S3-FIFO and LRU keeps losing it") {
  // 100 hot keys reused constantly, interleaved with a scan of 10000 keys never seen again,
  // in a cache of 200.
  std::vector<uint64_t> trace;
  uint64_t scan = 1000000;
  for (int round = 0; round < 100; ++round) {
    for (uint64_t k = 0; k < 100; ++k) {
      trace.push_back(k);
      trace.push_back(scan++);
      trace.push_back(scan++);
    }
  }
  size_t s3 = Hits(EvictionKind::kS3Fifo, 200, trace);
  size_t lru = Hits(EvictionKind::kLru, 200, trace);
  size_t fifo = Hits(EvictionKind::kFifo, 200, trace);
  INFO("s3fifo " << s3 << " lru " << lru << " fifo " << fifo);
  CHECK(s3 > 9000);  // nearly every hot access after the first round
  CHECK(s3 > 2 * lru);
  CHECK(s3 > 2 * fifo);
}

TEST_CASE("Export then Add in order rebuilds the same eviction order") {
  for (EvictionKind kind : {EvictionKind::kS3Fifo, EvictionKind::kLru, EvictionKind::kFifo}) {
    auto a = MakeEvictionPolicy(kind);
    for (uint64_t k = 1; k <= 50; ++k) a->Add(k, k);
    for (uint64_t k = 1; k <= 50; k += 3) a->Touch(k);
    for (int i = 0; i < 10; ++i) a->Evict();  // moves some entries between S3-FIFO queues
    for (uint64_t k = 2; k <= 50; k += 7) a->Touch(k);
    auto b = MakeEvictionPolicy(kind);
    for (auto [key, state] : a->Export()) b->Add(key, key, state);
    CHECK(b->bytes() == a->bytes());
    CHECK(Drain(*b) == Drain(*a));
  }
}

}  // namespace kelp::mount::cache
