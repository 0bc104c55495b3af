#include "filer/store/testing/kv_conformance.h"

#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "shared/mutex.h"

namespace kelp::filer::testing {
namespace {

std::vector<std::string> Keys(KvReader& r, std::string_view b, std::string_view e, size_t hint = 0) {
  std::vector<std::string> out;
  auto it = r.Scan(b, e, hint);
  for (; it->Valid(); it->Next()) out.emplace_back(it->key());
  REQUIRE(it->status().ok());
  return out;
}

void Basics(KvStore& kv) {
  REQUIRE(kv.Put("a1", "x").ok());
  WriteBatch b;
  b.Put("a2", "y");
  b.Put("a3", "z");
  b.Put("b1", "w");
  b.Delete("a1");
  REQUIRE(kv.Write(b, true).ok());
  CHECK(kv.Get("a1").status().code() == absl::StatusCode::kNotFound);
  CHECK(*kv.Get("a2") == "y");
  auto it = kv.Scan("a", "b");
  // The scan is a snapshot: a write after it started is not seen.
  REQUIRE(kv.Put("a25", "late").ok());
  std::vector<std::string> keys;
  for (; it->Valid(); it->Next()) keys.emplace_back(it->key());
  CHECK(keys == std::vector<std::string>{"a2", "a3"});
  it.reset();
  WriteBatch r;
  r.DeleteRange("a", "b");
  REQUIRE(kv.Write(r, false).ok());
  CHECK(Keys(kv, "", "") == std::vector<std::string>{"b1"});
  CHECK(kv.Sync().ok());
}

void BinaryKeysInByteOrder(KvStore& kv) {
  // Keys are compared as unsigned bytes, shorter first on a common prefix; values may be
  // empty or hold any byte.
  std::vector<std::string> keys = {std::string("\x00", 1), std::string("\x00\x00", 2), "\x01", "A", "a",
                                   "\x7f", "\x80", "\xfe\xff", "\xff", std::string("\xff\x00", 2), "\xff\xff"};
  WriteBatch b;
  for (size_t i = 0; i < keys.size(); ++i) b.Put(keys[i], i == 0 ? std::string() : std::string("v\x00\xff", 3) + keys[i]);
  REQUIRE(kv.Write(b, false).ok());
  CHECK(Keys(kv, "", "") == keys);
  CHECK(*kv.Get(keys[0]) == "");
  CHECK(*kv.Get("\xff") == std::string("v\x00\xff", 3) + "\xff");
  // Bounded and half-open ranges.
  CHECK(Keys(kv, "\x01", "a") == std::vector<std::string>{"\x01", "A"});
  CHECK(Keys(kv, "\xff", "") == std::vector<std::string>{"\xff", std::string("\xff\x00", 2), "\xff\xff"});
  {
    // A hint bounds what the caller reads, not what the store may return.
    auto it = kv.Scan("", "", 3);
    for (size_t i = 0; i < 3; ++i, it->Next()) {
      REQUIRE(it->Valid());
      CHECK(it->key() == keys[i]);
    }
  }
  CHECK(*kv.Count("", "") == keys.size());
  CHECK(*kv.Count("\x01", "a") == 2);
  CHECK(*kv.Count("\xff", "") == 3);
  WriteBatch r;
  r.DeleteRange("\x80", "");  // to the end of the keyspace
  REQUIRE(kv.Write(r, false).ok());
  CHECK(*kv.Count("", "") == 6);
}

void LongScansAndBigBatches(KvStore& kv) {
  WriteBatch b;
  for (int i = 0; i < 2500; ++i) {
    char k[16];
    snprintf(k, sizeof k, "k%06d", i);
    b.Put(k, std::string(100, static_cast<char>('a' + i % 26)));
  }
  REQUIRE(kv.Write(b, false).ok());
  auto keys = Keys(kv, "k", "l");
  REQUIRE(keys.size() == 2500);
  CHECK(keys.front() == "k000000");
  CHECK(keys.back() == "k002499");
  for (size_t i = 1; i < keys.size(); ++i) REQUIRE(keys[i - 1] < keys[i]);
  // The same inside a transaction, then a commit that deletes them all.
  auto txn = kv.Begin();
  CHECK(Keys(*txn, "k", "l").size() == 2500);
  WriteBatch d;
  for (const auto& k : keys) d.Delete(k);
  REQUIRE(txn->Commit(d, false).ok());
  CHECK(*kv.Count("k", "l") == 0);
}

void Requires(KvStore& kv) {
  REQUIRE(kv.Put("guard", "1").ok());
  WriteBatch ok;
  ok.Require("guard");
  ok.Put("r1", "x");
  REQUIRE(kv.Write(ok, false).ok());
  CHECK(*kv.Get("r1") == "x");

  WriteBatch bad;
  bad.Put("r2", "x");
  bad.Require("guard");
  bad.Require("missing");
  bad.Delete("r1");
  absl::Status s = kv.Write(bad, false);
  REQUIRE(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(MissingKeyOf(s) == std::optional<std::string>("missing"));
  // Nothing of a failed batch applied.
  CHECK(kv.Get("r2").status().code() == absl::StatusCode::kNotFound);
  CHECK(*kv.Get("r1") == "x");

  auto txn = kv.Begin();
  CHECK(*txn->Get("guard") == "1");
  WriteBatch t;
  t.Require("gone");
  t.Put("r3", "x");
  s = txn->Commit(t, false);
  CHECK(MissingKeyOf(s) == std::optional<std::string>("gone"));
  CHECK(kv.Get("r3").status().code() == absl::StatusCode::kNotFound);
}

void Transactions(KvStore& kv) {
  REQUIRE(kv.Put("n", "1").ok());
  {
    auto txn = kv.Begin();
    auto v = txn->Get("n");
    REQUIRE(v.ok());
    CHECK(txn->Get("absent").status().code() == absl::StatusCode::kNotFound);
    WriteBatch b;
    b.Put("n", std::to_string(std::stoi(*v) + 1));
    REQUIRE(txn->Commit(b, false).ok());
    // After Commit reads see the store.
    CHECK(*txn->Get("n") == "2");
    CHECK(txn->Commit(b, false).code() == absl::StatusCode::kFailedPrecondition);
  }
  {
    // Dropped without Commit: nothing written, and the store is usable at once.
    auto txn = kv.Begin();
    CHECK(*txn->Get("n") == "2");
  }
  REQUIRE(kv.Put("n", "3").ok());
  CHECK(*kv.Get("n") == "3");
  // A blind write in a transaction that read nothing.
  auto txn = kv.Begin();
  WriteBatch b;
  b.Put("blind", "1");
  REQUIRE(txn->Commit(b, true).ok());
  CHECK(*kv.Get("blind") == "1");
}

// Stores several processes share: what one transaction read and another changed makes one
// of them conflict.
void Conflicts(KvStore& kv) {
  SECTION("lost update") {
    REQUIRE(kv.Put("c", "0").ok());
    auto t1 = kv.Begin();
    auto t2 = kv.Begin();
    REQUIRE(t1->Get("c").ok());
    REQUIRE(t2->Get("c").ok());
    WriteBatch b1, b2;
    b1.Put("c", "t1");
    b2.Put("c", "t2");
    absl::Status s1 = t1->Commit(b1, false);
    absl::Status s2 = t2->Commit(b2, false);
    CHECK(s1.ok() != s2.ok());
    CHECK((IsConflict(s1) || IsConflict(s2)));
    CHECK(*kv.Get("c") == (s1.ok() ? "t1" : "t2"));
  }
  SECTION("write skew over an absence (two creates of one name that check different keys)") {
    // t1: "x absent? then write y"; t2: "y absent? then write x". Serially one of them would
    // have seen the other's key.
    auto t1 = kv.Begin();
    auto t2 = kv.Begin();
    CHECK(t1->Get("x").status().code() == absl::StatusCode::kNotFound);
    CHECK(t2->Get("y").status().code() == absl::StatusCode::kNotFound);
    WriteBatch b1, b2;
    b1.Put("y", "1");
    b2.Put("x", "1");
    absl::Status s1 = t1->Commit(b1, false);
    absl::Status s2 = t2->Commit(b2, false);
    CHECK(s1.ok() != s2.ok());
    CHECK((IsConflict(s1) || IsConflict(s2)));
  }
  SECTION("write skew over a range (rmdir's emptiness check against a create)") {
    REQUIRE(kv.Put("dir", "d").ok());
    auto rmdir = kv.Begin();
    auto create = kv.Begin();
    CHECK(*rmdir->Count("dir/", "dir0") == 0);
    REQUIRE(create->Get("dir").ok());
    WriteBatch b1, b2;
    b1.Delete("dir");
    b2.Put("dir/child", "1");
    absl::Status s2 = create->Commit(b2, false);
    absl::Status s1 = rmdir->Commit(b1, false);
    CHECK(s1.ok() != s2.ok());
    CHECK((IsConflict(s1) || IsConflict(s2)));
    // Never both: a directory gone with a child under it.
    CHECK((kv.Get("dir").ok() || *kv.Count("dir/", "dir0") == 0));
  }
  SECTION("a plain Write conflicts with a transaction that read its key") {
    REQUIRE(kv.Put("w", "0").ok());
    auto t = kv.Begin();
    REQUIRE(t->Get("w").ok());
    REQUIRE(kv.Put("w", "other").ok());
    WriteBatch b;
    b.Put("w", "t");
    CHECK(IsConflict(t->Commit(b, false)));
    CHECK(*kv.Get("w") == "other");
  }
  SECTION("many threads incrementing one counter lose nothing") {
    REQUIRE(kv.Put("ctr", "0").ok());
    constexpr int kThreads = 4, kEach = 25;
    std::vector<std::thread> threads;
    kelp::Mutex mu;
    std::vector<std::string> errors;  // Catch2 assertions are not thread-safe
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < kEach; ++i) {
          for (;;) {
            auto txn = kv.Begin();
            auto v = txn->Get("ctr");
            absl::Status s = v.status();
            if (s.ok()) {
              WriteBatch b;
              b.Put("ctr", std::to_string(std::stoi(*v) + 1));
              s = txn->Commit(b, false);
            }
            if (s.ok()) break;
            if (!IsConflict(s)) {
              kelp::MutexLock lock(mu);
              errors.push_back(s.ToString());
              return;
            }
          }
        }
      });
    }
    for (auto& th : threads) th.join();
    CHECK(errors.empty());
    CHECK(*kv.Get("ctr") == std::to_string(kThreads * kEach));
  }
}

}  // namespace

void RunKvConformance(const KvBackend& backend) {
  auto kv = backend.open_empty();
  REQUIRE(kv);
  SECTION("put, get, delete, snapshot scans, range delete") { Basics(*kv); }
  SECTION("binary keys in unsigned byte order") { BinaryKeysInByteOrder(*kv); }
  SECTION("long scans and big batches") { LongScansAndBigBatches(*kv); }
  SECTION("Require makes a batch conditional") { Requires(*kv); }
  SECTION("transactions") { Transactions(*kv); }
  if (kv->shared()) {
    SECTION("conflicts between transactions") { Conflicts(*kv); }
  }
  if (backend.reopen) {
    SECTION("what was written survives a reopen") {
      REQUIRE(kv->Put("persist", "me", true).ok());
      kv.reset();
      auto again = backend.reopen();
      REQUIRE(again);
      CHECK(*again->Get("persist") == "me");
    }
  }
}

}  // namespace kelp::filer::testing
