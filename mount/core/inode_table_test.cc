#include "mount/core/inode_table.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <thread>

namespace kelp::mount {
namespace {

Attr MakeAttr(uint64_t ino) {
  Attr a;
  a.set_ino(ino);
  a.set_version(1);
  return a;
}

TEST_CASE("inode table: an inode stays while the kernel looks it up or a handle is open") {
  FileContext ctx;  // FileData only needs it for its chunk size and hand-overs here
  InodeTable t;
  t.AddLookup(7, 2);
  CHECK(t.lookups(7) == 2);
  bool first = false;
  auto f = t.OpenFile(&ctx, MakeAttr(7), &first);
  CHECK(first);
  auto g = t.OpenFile(&ctx, MakeAttr(7), &first);
  CHECK_FALSE(first);
  CHECK(f == g);  // handles share one FileData
  CHECK(t.File(7) == f);
  CHECK(t.OpenInodes() == std::vector<uint64_t>{7});

  t.Forget(7, 5);  // more than it had: clamps at 0, and the open handles keep it
  CHECK(t.lookups(7) == 0);
  CHECK(t.size() == 1);
  CHECK_FALSE(t.CloseFile(7));  // one handle left
  CHECK(t.File(7) != nullptr);
  CHECK(t.CloseFile(7));  // the last: FileData dropped, and the inode with it
  CHECK(t.File(7) == nullptr);
  CHECK(t.size() == 0);
  CHECK_FALSE(t.CloseFile(7));  // a close without an open is ignored
  t.Forget(99, 1);               // and so is a forget of an unknown inode
  CHECK(t.size() == 0);
}

TEST_CASE("inode table: a reopened file gets a fresh FileData; the cached version decides keep_cache") {
  FileContext ctx;
  InodeTable t;
  t.AddLookup(3);
  bool first;
  auto f = t.OpenFile(&ctx, MakeAttr(3), &first);
  CHECK_FALSE(t.SetCachedVersion(3, 5));  // the kernel had nothing of version 5
  CHECK(t.SetCachedVersion(3, 5));        // now it has
  CHECK(t.CloseFile(3));
  CHECK(t.size() == 1);                   // the lookup keeps it
  auto g = t.OpenFile(&ctx, MakeAttr(3), &first);
  CHECK(first);
  CHECK(f != g);
  CHECK(t.SetCachedVersion(3, 5));  // remembered across the close
  CHECK_FALSE(t.SetCachedVersion(4, 1));  // unknown inode
  auto known = t.KnownInodes();
  CHECK(known == std::vector<uint64_t>{3});
  CHECK(t.OpenFiles().size() == 1);
  CHECK(t.CloseFile(3));
}

TEST_CASE("inode table: concurrent lookups, forgets, opens and closes balance out") {
  FileContext ctx;
  InodeTable t;
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      for (int i = 0; i < 2000; ++i) {
        uint64_t ino = 1 + (i + k) % 16;
        t.AddLookup(ino);
        bool first;
        t.OpenFile(&ctx, MakeAttr(ino), &first);
        t.CloseFile(ino);
        t.Forget(ino, 1);
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(t.size() == 0);
  CHECK(t.OpenInodes().empty());
}

}  // namespace
}  // namespace kelp::mount
