#include <sys/stat.h>

#include <map>
#include <set>

#include "filer/core/test_util.h"

using namespace kelp::filer;
using namespace kelp::filer::testing;

TEST_CASE("lookup and getattr") {
  Harness h(KELP_BACKENDS);
  uint64_t d = h.Mkdir(1, "d");
  uint64_t f = h.Mkfile(d, "f");
  CHECK(h.fs->Lookup(d, "f")->ino() == f);
  CHECK(h.fs->Lookup(d, ".")->ino() == d);
  CHECK(h.fs->Lookup(d, "..")->ino() == 1);
  CHECK(h.fs->Lookup(1, "..")->ino() == 1);
  CHECK(Err(h.fs->Lookup(d, "missing")) == ENOENT);
  CHECK(Err(h.fs->Lookup(f, "x")) == ENOTDIR);
  CHECK(Err(h.fs->Lookup(12345, "x")) == ENOENT);
  CHECK(Err(h.fs->Lookup(d, "a/b")) == EINVAL);
  CHECK(Err(h.fs->Lookup(d, std::string(300, 'x'))) == ENAMETOOLONG);
  CHECK(Err(h.fs->GetAttr(12345)) == ENOENT);
  CHECK(Err(h.fs->GetAttr(0)) == ENOENT);
  CHECK(h.fs->ResolvePath("/d/f")->ino() == f);
  CHECK(h.fs->ResolvePath("d//f/")->ino() == f);
  CHECK(h.fs->ResolvePath("/")->ino() == 1);
  CHECK(Err(h.fs->ResolvePath("/d/f/x")) == ENOTDIR);
  CHECK(Err(h.fs->ResolvePath("/d/../d")) == EINVAL);
  CHECK(Err(h.fs->ResolvePath("/nope")) == ENOENT);
}

TEST_CASE("readdir: insertion order, stable cookies, resume, attrs") {
  Harness h(KELP_BACKENDS);
  uint64_t d = h.Mkdir(1, "d");
  for (int i = 0; i < 10; ++i) h.Mkfile(d, "f" + std::to_string(i));
  std::vector<DirEntry> all;
  REQUIRE(h.fs->ReadDir(d, 0, 0, true, [&](DirEntry&& e) {
            all.push_back(std::move(e));
            return true;
          }).ok());
  REQUIRE(all.size() == 10);
  for (int i = 0; i < 10; ++i) {
    CHECK(all[i].name() == "f" + std::to_string(i));
    CHECK(all[i].type() == S_IFREG);
    CHECK(all[i].attr().ino() == all[i].ino());
    if (i > 0) CHECK(all[i].cookie() > all[i - 1].cookie());
  }

  // Resume after the 4th entry, while entries before and after the cursor change.
  REQUIRE(h.fs->Unlink(d, "f1").ok());  // already listed
  REQUIRE(h.fs->Unlink(d, "f6").ok());  // not yet listed: vanishes, nothing else does
  h.Mkfile(d, "late");                  // added: shows up at the end
  std::vector<std::string> rest;
  REQUIRE(h.fs->ReadDir(d, all[3].cookie(), 0, false, [&](DirEntry&& e) {
            rest.push_back(e.name());
            return true;
          }).ok());
  CHECK(rest == std::vector<std::string>{"f4", "f5", "f7", "f8", "f9", "late"});

  // A limit, and stopping early from the callback.
  std::vector<std::string> two;
  REQUIRE(h.fs->ReadDir(d, 0, 2, false, [&](DirEntry&& e) {
            two.push_back(e.name());
            return true;
          }).ok());
  CHECK(two == std::vector<std::string>{"f0", "f2"});
  int calls = 0;
  REQUIRE(h.fs->ReadDir(d, 0, 0, false, [&](DirEntry&&) { return ++calls < 3; }).ok());
  CHECK(calls == 3);

  CHECK(Err(h.fs->ReadDir(h.fs->Lookup(d, "f0")->ino(), 0, 0, false,
                          [](DirEntry&&) { return true; })) == ENOTDIR);
  CHECK(Err(h.fs->ReadDir(4242, 0, 0, false, [](DirEntry&&) { return true; })) == ENOENT);
}

TEST_CASE("readdir pages through a large directory without losing or repeating") {
  Harness h(KELP_BACKENDS);
  uint64_t d = h.Mkdir(1, "big");
  const int n = 2500;  // more than one internal scan batch
  for (int i = 0; i < n; ++i) h.Mkfile(d, "e" + std::to_string(i));
  std::set<std::string> seen;
  uint64_t cookie = 0;
  int pages = 0;
  for (;;) {
    int got = 0;
    REQUIRE(h.fs->ReadDir(d, cookie, 300, false, [&](DirEntry&& e) {
              CHECK(seen.insert(e.name()).second);
              cookie = e.cookie();
              ++got;
              return true;
            }).ok());
    if (got == 0) break;
    ++pages;
    // Churn between pages: remove an entry already seen, add a new one.
    if (pages < 5) {
      REQUIRE(h.fs->Unlink(d, "e" + std::to_string(pages)).ok());
      h.Mkfile(d, "new" + std::to_string(pages));
    }
  }
  for (int i = 0; i < n; ++i) CHECK(seen.count("e" + std::to_string(i)) == 1);
  for (int p = 1; p < 5; ++p) CHECK(seen.count("new" + std::to_string(p)) == 1);
}

TEST_CASE("readdir: a rename within the directory keeps the entry's place") {
  Harness h(KELP_BACKENDS);
  uint64_t d = h.Mkdir(1, "d");
  for (std::string n : {"a", "b", "c"}) h.Mkfile(d, n);
  uint64_t other = h.Mkdir(1, "other");
  REQUIRE(h.fs->Rename(d, "a", d, "z", 0).ok());
  CHECK(h.Names(d) == std::vector<std::string>{"z", "b", "c"});
  REQUIRE(h.fs->Rename(d, "z", other, "z", 0).ok());
  REQUIRE(h.fs->Rename(other, "z", d, "a", 0).ok());  // back in: added at the end
  CHECK(h.Names(d) == std::vector<std::string>{"b", "c", "a"});
  REQUIRE(h.fs->Rename(d, "a", d, "b", 0).ok());  // over "b": takes b's place
  CHECK(h.Names(d) == std::vector<std::string>{"b", "c"});
  h.RequireConsistent();
}

TEST_CASE("list by name pages in name order") {
  Harness h(KELP_BACKENDS);
  uint64_t d = h.Mkdir(1, "d");
  for (std::string n : {"c", "a", "e", "b", "d"}) h.Mkfile(d, n);
  std::vector<std::string> names;
  REQUIRE(h.fs->ListByName(d, "", 0, true, [&](DirEntry&& e) {
            names.push_back(e.name());
            CHECK(e.attr().ino() == e.ino());
            return true;
          }).ok());
  CHECK(names == std::vector<std::string>{"a", "b", "c", "d", "e"});
  names.clear();
  REQUIRE(h.fs->ListByName(d, "b", 2, false, [&](DirEntry&& e) {
            names.push_back(e.name());
            return true;
          }).ok());
  CHECK(names == std::vector<std::string>{"c", "d"});
}

TEST_CASE("listings with attrs: children with consecutive or scattered inodes, hard links") {
  Harness h(KELP_BACKENDS);
  uint64_t together = h.Mkdir(1, "together");
  uint64_t scattered = h.Mkdir(1, "scattered");
  uint64_t filler = h.Mkdir(1, "filler");
  std::map<std::string, uint64_t> want_together, want_scattered;
  for (int i = 0; i < 30; ++i) want_together["t" + std::to_string(i)] = h.Mkfile(together, "t" + std::to_string(i));
  // Many inodes made elsewhere between two children: their numbers spread far apart (read one
  // by one rather than by one range scan).
  for (int i = 0; i < 20; ++i) {
    want_scattered["s" + std::to_string(i)] = h.Mkfile(scattered, "s" + std::to_string(i));
    for (int j = 0; j < 15; ++j) h.Mkfile(filler, "x" + std::to_string(i * 15 + j));
  }
  // One inode under two names in each.
  for (auto* m : {&want_together, &want_scattered}) {
    uint64_t dir = m == &want_together ? together : scattered;
    uint64_t first = m->begin()->second;
    REQUIRE(h.fs->Link(first, dir, "link").ok());
    (*m)["link"] = first;
  }
  for (uint64_t dir : {together, scattered}) {
    const auto& want = dir == together ? want_together : want_scattered;
    for (bool by_name : {false, true}) {
      std::map<std::string, Attr> got;
      auto collect = [&](DirEntry&& e) {
        got[e.name()] = e.attr();
        return true;
      };
      REQUIRE((by_name ? h.fs->ListByName(dir, "", 0, true, collect) : h.fs->ReadDir(dir, 0, 0, true, collect)).ok());
      REQUIRE(got.size() == want.size());
      for (const auto& [name, ino] : want) {
        INFO(name);
        REQUIRE(got.count(name));
        CHECK(got[name].ino() == ino);
        CHECK(S_ISREG(got[name].mode()));
        CHECK(got[name].nlink() == (ino == want.at("link") ? 2u : 1u));
      }
    }
  }
}
